"""The bf16 training step on CPU beside its own bf16 GEMM bound (issue 69 item 3): one training step (forward,
backward of a fixed upstream gradient into the parameters and the input) of ``SRU(512, 512, num_layers=2)`` at
L=64 B=32 in fp32 and under ``torch.autocast("cpu", torch.bfloat16)`` (``trainer.precision=bf16``), each beside
the products it cannot avoid: U = X W, dX = dU Wᵀ and dW = Xᵀ dU of both layers, in the step's dtype; nn.LSTM
(2 x 512) in fp32 and under the same autocast beside them; and where the step's time goes: its products, the
fused recurrence of its layers (the kernel's forward and backward on U in the products' dtype, as the fused
training layer calls them) and the rest (casts, adds, autograd; negative where the step's GEMM library beats the
bound's MKL). One process, candidates interleaved (bench/harness.py); each ratio is the median over rounds of the
per-round ratio.

    python -m bench.precision.training --threads 1 --repeats 9
"""
import torch
from torch import nn

import sru
from bench.harness import (bench_parser, calls_per_sample, fmt, interleaved, machine_info, make_timer,
                           markdown_table, paired_ratio, summarize)
from sru import Precision
from sru.ops.precision import names
from sru.ops.backends import cpu_kernel as kernel, load_library
from sru.ops.spec import SKIP_SCALED_X
from sru.quantize import bf16_native


def _step(model: nn.Module, x: torch.Tensor, grad: torch.Tensor, precision: Precision):
    def run():
        model.zero_grad(set_to_none=True)
        x.grad = None
        with precision.autocast("cpu"):
            h = model(x)[0]
        h.backward(grad.to(h.dtype))
    return run


def _gemm_bound(rows: int, d_in: int, d_out: int, layers: int, dtype: torch.dtype):
    """The step's unavoidable products in ``dtype``: per layer U = X W, dX = dU Wᵀ, dW = Xᵀ dU."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(rows, d_in, generator=g).to(dtype), torch.randn(d_in, d_out, generator=g).to(dtype)
    du = torch.randn(rows, d_out, generator=g).to(dtype)

    def run():
        for _ in range(layers):
            x.mm(w), du.mm(w.t()), x.t().mm(du)
    return run


def _recurrence(length: int, batch: int, width: int, layers: int, dtype: torch.dtype):
    """The step's fused recurrence: per layer the kernel's forward (keeping the states) and backward, on U in
    ``dtype`` (a bf16 U is widened inside the kernel), every other tensor float32."""
    g = torch.Generator().manual_seed(0)
    U = torch.randn(length, batch, 3 * width, generator=g).to(dtype)
    x, grad_h = torch.randn(length, batch, width, generator=g), torch.randn(length, batch, width, generator=g)
    inputs = (U, x, torch.randn(2 * width, generator=g) * 0.1, torch.zeros(2 * width), None, None, None)
    options = kernel.KernelOptions(width, 1, SKIP_SCALED_X, False, 1.0)

    def run():
        lib = load_library()
        if lib is None:
            raise RuntimeError("the fused CPU kernel is unavailable")
        for _ in range(layers):
            states = kernel.forward(lib, inputs, options, True)[2]
            kernel.backward(lib, (grad_h, None), inputs, states, options, False)
    return run


def candidates(length: int, batch: int, width: int, layers: int = 2) -> dict:
    torch.manual_seed(0)
    x = torch.randn(length, batch, width, requires_grad=True)
    grad = torch.randn(length, batch, width)
    model, lstm = sru.SRU(width, width, num_layers=layers), nn.LSTM(width, width, num_layers=layers)
    rows, k = length * batch, 3
    fns = {}
    for precision, dtype in ((Precision.FP32, torch.float32), (Precision.BF16, torch.bfloat16)):
        fns[f"SRU {precision}"] = _step(model, x, grad, precision)
        fns[f"GEMM bound {precision}"] = _gemm_bound(rows, width, k * width, layers, dtype)
        fns[f"recurrence {precision}"] = _recurrence(length, batch, width, layers, dtype)
        fns[f"nn.LSTM {precision}"] = _step(lstm, x, grad, precision)
    return fns


def runnable(fns: dict):
    """(the candidates that run here, {name: the error of each that does not}): e.g. nn.LSTM under bf16
    autocast with oneDNN capped to AVX2 finds no primitive."""
    failed = {}
    for name, fn in list(fns.items()):
        try:
            fn()
        except RuntimeError as err:
            failed[name] = str(err).splitlines()[0]
            del fns[name]
    return fns, failed


def _ms(s: dict, name: str):
    return s[name]["median_ms"] if name in s else None


def _ratio(s: dict, a: str, b: str):
    return paired_ratio(s[a], s[b]) if a in s and b in s else None


def split(s: dict, precision: str) -> str:
    """One line: the share of the step's median time in its products, its recurrence and the rest."""
    parts = [f"SRU {precision}", f"GEMM bound {precision}", f"recurrence {precision}"]
    if not all(name in s for name in parts):
        return f"- the {precision} step's split: not measured here"
    step, gemms, recurrence = (s[name]["median_ms"] for name in parts)
    shares = (gemms / step, recurrence / step, (step - gemms - recurrence) / step)
    return (f"- the {precision} step's split: its GEMMs {shares[0]:.0%}, the fused recurrence {shares[1]:.0%}, "
            f"the rest {shares[2]:.0%}")


def main(argv=None) -> None:
    parser = bench_parser(__doc__, threads=1, repeats=9, length=64, batch=32, width=512, min_ms=150.0)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: this thread's CPU time (1 thread; load from other processes does not count)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    timer = make_timer("cpu", args.clock)
    fns, failed = runnable(candidates(args.length, args.batch, args.width))
    numbers = {k: calls_per_sample(f, timer, min_ms=args.min_ms, warmup=3) for k, f in fns.items()}
    s = {k: summarize(v) for k, v in interleaved(fns, timer, args.repeats, numbers).items()}
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, native bf16 {bf16_native()}, "
          f"{args.threads} thread(s), {args.clock} clock, torch {info['torch']}, L={args.length} B={args.batch} "
          f"d={args.width} x 2 layers, {args.repeats} rounds; `{info['command']}`\n")
    rows = [[p, fmt(_ms(s, f"SRU {p}"), ".2f"), fmt(_ms(s, f"GEMM bound {p}"), ".2f"),
             fmt(_ratio(s, f"SRU {p}", f"GEMM bound {p}"), ".2f", "×"),
             fmt(_ratio(s, "SRU fp32", f"SRU {p}"), ".2f", "×"),
             fmt(_ms(s, f"nn.LSTM {p}"), ".2f"), fmt(_ratio(s, "nn.LSTM fp32", f"nn.LSTM {p}"), ".2f", "×"),
             fmt(_ratio(s, f"nn.LSTM {p}", f"SRU {p}"), ".2f", "×")] for p in names((Precision.FP32, Precision.BF16))]
    print(markdown_table(["precision", "SRU step ms", "its GEMMs ms", "step / GEMMs", "SRU speed-up vs fp32",
                          "nn.LSTM step ms", "nn.LSTM speed-up vs fp32", "nn.LSTM / SRU"], rows, "lrrrrrrr"))
    for precision in names((Precision.FP32, Precision.BF16)):
        print(split(s, precision))
    for name, error in failed.items():
        print(f"- {name}: does not run here ({error})")

if __name__ == "__main__":
    main()
