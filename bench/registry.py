"""Shapes and candidates for the layer speed benchmark (``bench.speed``, ``python -m bench.speed``).

A *candidate* is one way of doing a stack of sequence layers on one shape: the SRU for each
available backend, ``nn.LSTM`` (cuDNN on GPU), a stack of kernel-3 ``Conv1d`` layers (the
paper's CNN comparison) and the *GEMM bound* – only the input matmuls ``x @ W`` of every SRU
layer, the work an SRU layer cannot avoid. Each candidate owns its parameters and inputs and
exposes two closures, so the timing loop knows nothing about what it times:

    forward()      inference: one forward pass under ``torch.no_grad``
    train_step()   training: forward, backward of a fixed random upstream gradient into the
                   parameters *and* the input (set_to_none before each step, like an optimizer)
"""
import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn

from sru.ops.precision import AUTOCAST, Precision, parse


@dataclasses.dataclass(frozen=True)
class Shape:
    """One benchmark point: sequence length, batch, width (input = hidden per direction), layers; a
    bidirectional stack (then each layer after the first reads 2 * width) or one with layer norm."""

    length: int
    batch: int
    width: int
    layers: int
    bidirectional: bool = False
    layer_norm: bool = False

    @property
    def label(self) -> str:
        options = " bidir" * self.bidirectional + " LN" * self.layer_norm
        return f"L={self.length} B={self.batch} d={self.width} x{self.layers}{options}"


# The paper's speed figure (GTX 1070, one layer, B=32), the judged CPU shape, and the
# large GPU shape; "tiny" only exercises the machinery (tests).
PAPER_SHAPES = [Shape(32, 32, 256, 1), Shape(128, 32, 512, 1)]
JUDGED_SHAPE = Shape(64, 32, 512, 2)
JUDGED_DTYPE = Precision.FP32.value  # the precision the targets judge
# The targets at the judged shape (CPU, 2 threads, fp32): docs/speed/layer_speed.md.
JUDGED_TARGETS = {"train_vs_gemm_max": 1.15, "forward_vs_gemm_max": 1.10, "train_speedup_vs_lstm_min": 2.4}
LARGE_SHAPES = [Shape(256, 128, 1024, 2)]
# The 8-shape CPU grid (``--shapes grid``): the three above, the judged shape bidirectional and with layer
# norm, a short small batch (decoder-like), a wide stack and a long sequence at a small batch.
GRID_SHAPES = PAPER_SHAPES + [JUDGED_SHAPE, Shape(64, 32, 512, 2, bidirectional=True),
                              Shape(64, 32, 512, 2, layer_norm=True), Shape(16, 8, 512, 2),
                              Shape(64, 32, 1024, 2), Shape(256, 8, 512, 2)]
TINY_SHAPES = [Shape(8, 4, 32, 2)]


def shapes_for(grid: str, device: str) -> List[Shape]:
    """The shape list a ``--shapes`` choice means on ``device`` (large shapes: CUDA only)."""
    grids = {
        "paper": PAPER_SHAPES,
        "judged": [JUDGED_SHAPE],
        "tiny": TINY_SHAPES,
        "all": PAPER_SHAPES + [JUDGED_SHAPE] + (LARGE_SHAPES if device == "cuda" else []),
        "grid": GRID_SHAPES,
    }
    if grid not in grids:
        raise ValueError(f"--shapes: expected one of {sorted(grids)}, received {grid!r}")
    return grids[grid]


@dataclasses.dataclass
class Candidate:
    name: str
    forward: Callable[[], None]
    train_step: Callable[[], None]
    leaves: List[Tensor]  # what train_step fills .grad of: parameters and input(s)


def _autocast(device: str, dtype: str):
    """bf16 runs use autocast (the way users train); fp32 runs use no context at all."""
    return parse(dtype, AUTOCAST, "dtype").autocast(device)


def _module_candidate(name, module: nn.Module, x: Tensor, run: Callable[[nn.Module, Tensor], Tensor],
                      device: str, dtype: str) -> Candidate:
    """Wrap a module whose ``run(module, x)`` returns the output to back-propagate into."""
    with torch.no_grad(), _autocast(device, dtype):  # upstream grad in the output's own dtype
        grad_out = torch.randn_like(run(module, x))
    params = [p for p in module.parameters() if p.requires_grad]
    x_train = x.detach().clone().requires_grad_(True)

    def forward() -> None:
        with torch.no_grad(), _autocast(device, dtype):
            run(module, x)

    def train_step() -> None:
        for p in params:
            p.grad = None
        x_train.grad = None
        with _autocast(device, dtype):
            out = run(module, x_train)
        out.backward(grad_out)

    return Candidate(name, forward, train_step, params + [x_train])


def sru_projection_widths(shape: Shape) -> List[Tuple[int, int]]:
    """Per layer (d_in, columns of W) of the benchmarked SRU (skip term on), read from the module itself:
    with input = hidden width, k = 3 and W is (d, 3d); bidirectional, W is (d_in, 2 * k * d) with k = 4 in
    the first layer (its input is narrower than its output) and d_in = 2d after it – see
    docs/spec.md#parameters-and-layout."""
    from sru.modules import SRU

    module = SRU(shape.width, shape.width, num_layers=shape.layers, bidirectional=shape.bidirectional)
    return [tuple(cell.weight.shape) for cell in module.rnn_lst]


def gemm_bound(shape: Shape, device: str, dtype: str, generator: torch.Generator,
               library: Optional[str] = None) -> Candidate:
    """Only the input matmuls of every SRU layer: (L*B, d_in) @ (d_in, k*d), fwd and fwd+bwd.

    Each layer gets its own input leaf so that the backward computes grad of x and of W for
    every layer, exactly the matmul work of an SRU training step. ``library="onednn"``: the same
    three products through oneDNN (sru/ops/cpu/gemm.py, prepacked weight) instead of torch.mm's
    MKL: the layer is judged against the faster of the two.
    """
    from sru.ops import matmul

    product = (lambda x, w: x @ w) if library is None else (lambda x, w: matmul(x, w, library))
    rows = shape.length * shape.batch
    xs, ws = [], []
    for d_in, cols in sru_projection_widths(shape):
        xs.append(torch.randn(rows, d_in, generator=generator).to(device).requires_grad_(True))
        w = torch.randn(d_in, cols, generator=generator) * d_in ** -0.5
        ws.append(w.to(device).requires_grad_(True))
    with torch.no_grad(), _autocast(device, dtype):  # upstream grads in the outputs' dtype
        grads = [torch.randn_like(x @ w) for x, w in zip(xs, ws)]

    def forward() -> None:
        with torch.no_grad(), _autocast(device, dtype):
            for x, w in zip(xs, ws):
                product(x, w)

    def train_step() -> None:
        for t in xs + ws:
            t.grad = None
        with _autocast(device, dtype):
            outs = [product(x, w) for x, w in zip(xs, ws)]
        torch.autograd.backward(outs, grads)

    return Candidate("gemm-bound" if library is None else f"gemm-bound-{library}", forward, train_step, xs + ws)


def lstm(shape: Shape, device: str, dtype: str, generator: torch.Generator) -> Candidate:
    module = nn.LSTM(shape.width, shape.width, num_layers=shape.layers, bidirectional=shape.bidirectional).to(device)
    x = torch.randn(shape.length, shape.batch, shape.width, generator=generator).to(device)
    return _module_candidate("lstm", module, x, lambda m, inp: m(inp)[0], device, dtype)


def conv1d(shape: Shape, device: str, dtype: str, generator: torch.Generator) -> Candidate:
    """The paper's CNN comparison: kernel-3 convolutions, same width in and out, same depth."""
    module = nn.Sequential(*[nn.Conv1d(shape.width, shape.width, 3, padding=1)
                             for _ in range(shape.layers)]).to(device)
    # Channels-first (B, d, L) is the convolution's natural layout; no transpose is timed.
    x = torch.randn(shape.batch, shape.width, shape.length, generator=generator).to(device)
    return _module_candidate("conv1d-k3", module, x, lambda m, inp: m(inp), device, dtype)


def sru(shape: Shape, device: str, dtype: str, generator: torch.Generator, backend: str) -> Candidate:
    from sru.modules import SRU  # imported late: the benchmark also runs while sru/ is in flux

    module = SRU(shape.width, shape.width, num_layers=shape.layers, backend=backend,
                 bidirectional=shape.bidirectional, layer_norm=shape.layer_norm).to(device)
    x = torch.randn(shape.length, shape.batch, shape.width, generator=generator).to(device)
    return _module_candidate(f"sru-{backend}", module, x, lambda m, inp: m(inp)[0], device, dtype)


def sru_backends(device: str) -> List[str]:
    """The SRU backends worth timing on ``device``: what ``sru.ops`` reports as available,
    minus the ones meant for the other device (triton on CPU only runs interpreted)."""
    from sru.ops import available_backends

    wrong_device = {"cpu": {"triton"}, "cuda": {"cpu"}}[device]
    return [b for b in available_backends() if b not in wrong_device]


def build_candidates(shape: Shape, device: str, dtype: str, backends: List[str],
                     seed: int = 0) -> Dict[str, Callable[[], Candidate]]:
    """Name -> builder for every candidate on this shape; builders run lazily so one
    failing candidate (e.g. a backend that cannot compile) does not stop the others."""
    generator = torch.Generator().manual_seed(seed)
    builders: Dict[str, Callable[[], Candidate]] = {
        "gemm-bound": lambda: gemm_bound(shape, device, dtype, generator),
        "conv1d-k3": lambda: conv1d(shape, device, dtype, generator),
        "lstm": lambda: lstm(shape, device, dtype, generator),
    }
    if device == "cpu" and dtype == "fp32":  # the dispatch only chooses for fp32 on CPU
        builders["gemm-bound-onednn"] = lambda: gemm_bound(shape, device, dtype, generator, "onednn")
    for backend in backends:
        builders[f"sru-{backend}"] = lambda b=backend: sru(shape, device, dtype, generator, b)
    return builders
