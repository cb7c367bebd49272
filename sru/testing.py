"""Testing helpers for recurrence backends, public as ``torch.testing`` is: check a backend (ours or
your own, registered in ``sru.ops.backends.TABLE``) against the float64 reference loop.

    from sru import testing
    inputs, options = testing.case_inputs("padded-bi-k4-dropout-tanh", dtype=torch.float32)
    errors = testing.compare_with_reference(my_backend, inputs, **options)   # relative error per output

Used by this project's tests (``tests/test_ops_backends.py``, ``test_ops_cpu.py``, ``test_ops_triton.py``)
and by ``scripts/check_gpu.py``, so a case means the same inputs everywhere. Three pieces:

* ``make_inputs``: random leaves for one layer (U, x, weight_c, bias, c0, masks), drawn in
  float64 from a seeded CPU generator and then cast/moved, so a seed gives the same values on
  every device and dtype;
* ``compare_with_reference``: forward and backward of a backend and of the float64 reference
  under the same random upstream gradients for h AND c_last (a wrong gradient of any input
  shows), returning the relative error of every output and gradient;
* ``CASES``: the option combinations every fused backend must get right (docs/spec.md).

Nothing here is imported by ``sru`` itself: ``import sru.testing`` (or ``from sru import testing``) when needed.
"""
import contextlib
import os
from typing import Callable, Dict, Iterator, Optional, Sequence, Union

import torch
from torch import Tensor

from sru.ops import available_backends, elementwise_recurrence
from sru.ops.backends import TABLE
from sru.ops.reference import elementwise_recurrence_reference
from sru.ops.shapes import state_width

# Every backend that is not the oracle itself; a new entry of sru.ops.backends.TABLE is tested too.
FUSED_BACKENDS = tuple(b for b in TABLE if b != "reference")

# Largest relative error (max |a - b| / max |b|) against the float64 reference at test sizes.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2,
             torch.float16: 4e-3}

# Option combinations, as make_inputs keywords plus ``options`` (keywords of the call).
# ``interpreter=False``: too slow for Triton's CPU interpreter (runs compiled backends only).
CASES: Dict[str, dict] = {
    "uni": dict(),
    "bi": dict(bidirectional=True),
    "k4": dict(k=4, c0=True),
    "k4-bi": dict(k=4, bidirectional=True),
    "c0-dropout": dict(c0=True, mask_c=True, bidirectional=True),
    "mask-grad": dict(c0=True, mask_c="grad", k=4, lengths=[5, 2, 3]),
    "mask-grad-tanh": dict(mask_c="grad", bidirectional=True, options=dict(activation="tanh")),
    "padded": dict(B=4, lengths=[5, 2, 4, 1], c0=True),
    "padded-bi-k4-dropout-tanh": dict(B=4, lengths=[5, 3, 1, 4], bidirectional=True, k=4,
                                      mask_c=True, options=dict(activation="tanh")),
    "no-skip": dict(options=dict(has_skip_term=False)),
    "no-skip-k4": dict(k=4, bidirectional=True, options=dict(has_skip_term=False)),
    "tanh": dict(c0=True, options=dict(activation="tanh")),
    "tanh-int": dict(bidirectional=True, mask_c=True, options=dict(activation=1)),
    "per-step-weights": dict(per_step=True, c0=True, bidirectional=True, lengths=[5, 3, 4]),
    "scale-x-bi-padded": dict(bidirectional=True, mask_c=True, lengths=[5, 1, 3],
                              options=dict(scale_x=1.7)),
    "L1-B1-d1": dict(L=1, B=1, d=1, bidirectional=True, c0=True, options=dict(scale_x=0.5)),
    "B1": dict(B=1, d=33, k=4),
    # 2*3*21 = 126 state columns: Triton's 32-column programs end partly empty.
    "awkward-L17-d21": dict(L=17, B=3, d=21, bidirectional=True, mask_c=True,
                            lengths=[17, 9, 4], options=dict(activation="tanh")),
    # d = 37 = 4 * 8 + 5: the CPU kernel's AVX2 step (8 units at a time) and its generic tail.
    "vector-tail-tanh-scale-x": dict(d=37, c0=True, mask_c="grad", lengths=[5, 2, 4],
                                     options=dict(activation="tanh", scale_x=1.7)),
    "vector-tail-no-skip-tanh": dict(d=37, mask_c=True, options=dict(has_skip_term=False,
                                                                     activation="tanh")),
    # d = 500 is not a multiple of any vector width or chunk; L = 63 is odd.
    "awkward-L63-d500": dict(L=63, B=2, d=500, mask_c=True, lengths=[63, 40],
                             interpreter=False),
}

# Small enough for finite differences in float64 (gradcheck).
GRADCHECK_CASES: Dict[str, dict] = {
    "bi-k3-masks": dict(L=4, B=2, d=3, bidirectional=True, c0=True, mask_c="grad",
                        lengths=[4, 2], options=dict(scale_x=1.3)),
    "k4-tanh-per-step": dict(L=4, B=2, d=3, k=4, per_step=True, c0=True, lengths=[3, 4],
                             options=dict(activation="tanh")),
    "bi-per-step-masks-tanh": dict(L=3, B=2, d=2, bidirectional=True, c0=True, mask_c="grad",
                                   per_step=True, lengths=[3, 1],
                                   options=dict(activation="tanh", scale_x=1.2)),
}


def interpreted(backend: str) -> bool:
    """Whether ``backend`` runs in an interpreter here (Triton's, without a GPU)."""
    return TABLE[backend].interpreted_without_gpu and not torch.cuda.is_available()


def backend_device(backend: str) -> str:
    return "cuda" if TABLE[backend].device == "cuda" and torch.cuda.is_available() else "cpu"


def unavailable_reason(backend: str) -> Optional[str]:
    """None when ``backend`` can be tested in this process, else why not (for pytest.skip)."""
    if backend in available_backends():
        return None
    return TABLE[backend].untestable()  # e.g. no GPU for triton: None, it runs interpreted on CPU tensors


@contextlib.contextmanager
def triton_interpreter(backend: str = "triton") -> Iterator[None]:
    """Set TRITON_INTERPRET=1 while inside when ``backend`` must be interpreted; restore after.

    The kernels are jitted on first call per interpreter mode (sru/ops/triton/kernels.py, compiled_kernels), so this
    works even when triton was imported earlier."""
    old = os.environ.get("TRITON_INTERPRET")
    if interpreted(backend):
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


def make_inputs(L: int = 5, B: int = 3, d: int = 7, bidirectional: bool = False, k: int = 3,
                dtype: torch.dtype = torch.float64, device: str = "cpu", c0: bool = False,
                mask_c: Union[bool, str] = False,
                lengths: Union[None, str, Sequence[int]] = None, per_step: bool = False,
                param_dtype: Optional[torch.dtype] = None, seed: int = 0) -> dict:
    """Keyword arguments of ``elementwise_recurrence`` for one random layer.

    U, x, weight_c, bias (and c0 when ``c0``) are leaves that require grad; U and x are in
    ``dtype``, the parameters in ``param_dtype`` (default ``dtype``: pass float32 to mimic
    autocast, where only the matmul output is half precision). ``mask_c``: True gives a
    time-shared dropout mask scaled like the module's, "grad" the same as a leaf requiring
    grad. ``lengths``: one length per sequence (padding after it), or "random" (1..L, the
    first sequence full). ``per_step``: weight_c per step (L, B, dirs*d*2).
    """
    g = torch.Generator().manual_seed(seed)
    width = state_width(d, bidirectional)
    param_dtype = param_dtype or dtype

    def leaf(*shape, scale=1.0, dt=dtype):
        t = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
        return t.to(device, dt).requires_grad_()

    weight_c = (leaf(L, B, width * 2, scale=0.5, dt=param_dtype) if per_step
                else leaf(2 * width, scale=0.5, dt=param_dtype))
    inputs = dict(U=leaf(L, B, width * k), x=leaf(L, B, width), weight_c=weight_c,
                  bias=leaf(2 * width, scale=0.5, dt=param_dtype),
                  c0=leaf(B, width, dt=param_dtype) if c0 else None,
                  hidden_size=d, bidirectional=bidirectional)
    if mask_c:
        keep = torch.rand(B, width, generator=g, dtype=torch.float64) > 0.3
        inputs["mask_c"] = (keep.double() / 0.7).to(device, param_dtype)
        inputs["mask_c"].requires_grad_(mask_c == "grad")
    if isinstance(lengths, str):
        if lengths != "random":
            raise ValueError(f"lengths must be None, a list or 'random', received {lengths!r}")
        lengths = torch.randint(1, L + 1, (B,), generator=g)
        lengths[0] = L
    if lengths is not None:  # true = padding after each sequence's length
        inputs["mask_pad"] = (torch.arange(L)[:, None] >= torch.as_tensor(lengths)[None, :]
                              ).to(device)
    return inputs


def case_inputs(case: str, **overrides) -> tuple:
    """(inputs, call options) of ``CASES[case]`` with make_inputs keywords overridden."""
    spec = {n: v for n, v in CASES[case].items() if n not in ("options", "interpreter")}
    spec.update(overrides)
    return make_inputs(**spec), dict(CASES[case].get("options", {}))


def leaves(inputs: dict) -> Dict[str, Tensor]:
    return {n: t for n, t in inputs.items() if isinstance(t, Tensor) and t.requires_grad}


def as_float64(inputs: dict) -> dict:
    """Detached float64 copies (requires_grad kept), so the oracle runs at full precision."""
    return {n: (t.detach().double().requires_grad_(t.requires_grad)
                if isinstance(t, Tensor) and t.is_floating_point() else t)
            for n, t in inputs.items()}


def reference(**kwargs):
    """The reference, also accepting the dispatcher's activation spellings 0 / 1."""
    if kwargs.get("activation") in (0, 1):
        kwargs["activation"] = "tanh" if kwargs["activation"] == 1 else "none"
    return elementwise_recurrence_reference(**kwargs)


def backend_fn(backend: str) -> Callable:
    """The public entry point pinned to one backend (so dispatch is exercised too)."""
    if backend == "reference":
        return reference
    return lambda **kwargs: elementwise_recurrence(**kwargs, backend=backend)


def upstream_grads(inputs: dict, seed: int = 1):
    """Random float64 CPU gradients for h (L, B, dirs*d) and c_last (B, dirs*d)."""
    L, B = inputs["U"].shape[:2]
    width = (2 if inputs["bidirectional"] else 1) * inputs["hidden_size"]
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(L, B, width, generator=g, dtype=torch.float64),
            torch.randn(B, width, generator=g, dtype=torch.float64))


def forward_backward(fn: Callable, inputs: dict, grad_h: Tensor, grad_c: Tensor,
                     **options) -> Dict[str, Optional[Tensor]]:
    """{h, c_last, grad_<input>...} of ``fn``; a gradient is None where autograd gives none."""
    h, c = fn(**inputs, **options)
    named = leaves(inputs)
    gh, gc = grad_h.to(h.device, h.dtype), grad_c.to(c.device, c.dtype)
    grads = torch.autograd.grad((h, c), list(named.values()), (gh, gc), allow_unused=True)
    return dict(h=h, c_last=c, **{f"grad_{n}": gr for n, gr in zip(named, grads)})


def rel_err(got: Optional[Tensor], want: Optional[Tensor]) -> float:
    """max |got - want| / max |want|; a missing gradient equals an all-zero one."""
    if got is None or want is None:
        present = want if got is None else got
        return 0.0 if present is None or not present.any() else float("inf")
    got, want = got.double().cpu(), want.double().cpu()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()


def compare_with_reference(fn: Callable, inputs: dict, seed: int = 1,
                           **options) -> Dict[str, float]:
    """Relative error of every output and input gradient of ``fn`` vs the float64 reference.

    Raises AssertionError when a result has the wrong dtype, is not finite, or a gradient
    the reference has is missing."""
    grad_h, grad_c = upstream_grads(inputs, seed)
    got = forward_backward(fn, inputs, grad_h, grad_c, **options)
    want = forward_backward(reference, as_float64(inputs), grad_h, grad_c, **options)
    dtypes = dict(h=inputs["U"].dtype, c_last=inputs["U"].dtype,
                  **{f"grad_{n}": t.dtype for n, t in leaves(inputs).items()})
    for name, value in got.items():
        if value is None:
            assert want[name] is None, f"{name}: missing (the reference has it)"
            continue
        assert value.dtype == dtypes[name], f"{name}: dtype {value.dtype}, want {dtypes[name]}"
        assert torch.isfinite(value).all(), f"{name}: not finite"
    return {name: rel_err(got[name], want[name]) for name in want}
