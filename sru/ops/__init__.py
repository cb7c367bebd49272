"""One entry point for the SRU elementwise recurrence, dispatching to a backend.

Backends: ``reference`` (PyTorch loop, the specification), ``cpu`` (fused C++/OpenMP kernel,
built on first use), ``triton`` (fused GPU kernel). ``auto`` picks triton for CUDA tensors,
cpu for CPU tensors when the kernel builds, else the reference (after one warning). While
``torch.onnx.export`` / ``torch.export`` trace, every backend runs as the export form: a
``scan`` over time kept as one loop (sru/ops/export.py).
"""
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from .autograd import elementwise_recurrence_cpu  # registers the sru:: ops; builds nothing
from .cpu.build import load_library
from .export import elementwise_recurrence_scan, exporting
from .reference import elementwise_recurrence_reference
from .shapes import state_width

BACKENDS = ("auto", "reference", "cpu", "triton")
_ACTIVATIONS = {"none": "none", "tanh": "tanh", 0: "none", 1: "tanh"}

__all__ = ["BACKENDS", "available_backends", "elementwise_recurrence",
           "elementwise_recurrence_reference"]


def _cpu_kernel_available() -> bool:
    # Builds on first call; torch.compile evaluates it once at trace time, not in the graph.
    return load_library() is not None


# What torch.compiler.assume_constant_result does, without importing torch._dynamo at
# `import sru` time (that import alone costs seconds).
_cpu_kernel_available._dynamo_marked_constant = True


def _triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


def available_backends() -> list:
    """Backends usable in this process (``cpu`` is built here if it was not yet)."""
    found = ["reference"]
    if _cpu_kernel_available():
        found.append("cpu")
    if _triton_available():
        found.append("triton")
    return found


def _shape_error(name: str, expected, tensor: Tensor, why: str = "") -> ValueError:
    return ValueError(f"{name} must have shape {tuple(expected)}{why}, received "
                      f"{tuple(tensor.shape)}")


def _check_inputs(U, x, weight_c, bias, c0, hidden_size, bidirectional, has_skip_term,
                  activation, mask_c, mask_pad, backend) -> str:
    """Raise one ValueError naming expected vs received; return the activation name."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, received {backend!r}")
    if not isinstance(activation, (str, int)) or activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be 'none', 'tanh', 0 or 1, received {activation!r}")
    if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or hidden_size < 1:
        raise ValueError(f"hidden_size must be a positive int, received {hidden_size!r}")
    if not isinstance(U, Tensor) or U.dim() != 3:
        got = tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__
        raise ValueError(f"U must be 3-D (length, batch, dirs*hidden_size*k), received {got}")
    length, batch = U.shape[0], U.shape[1]
    if length < 1 or batch < 1:
        raise ValueError(f"U needs length >= 1 and batch >= 1, received {tuple(U.shape)}")
    width = state_width(hidden_size, bidirectional)  # dirs * d
    if U.shape[2] not in (width * 3, width * 4):
        raise ValueError(f"U's last dim must be dirs*hidden_size*k = {width}*k with k in {{3, 4}} "
                         f"(= {width * 3} or {width * 4}), received {tuple(U.shape)}")
    k = U.shape[2] // width
    named = {"U": U, "weight_c": weight_c, "bias": bias, "c0": c0, "mask_c": mask_c}
    if has_skip_term and k == 3:
        if x is None:
            raise ValueError(f"x of shape {(length, batch, width)} is required when "
                             "has_skip_term=True and k == 3 (skip input), received None")
        named["x"] = x
        if tuple(x.shape) != (length, batch, width):
            raise _shape_error("x", (length, batch, width), x, " (the skip input)")
    for name, t in named.items():
        if t is not None and (not isinstance(t, Tensor) or not t.is_floating_point()):
            got = t.dtype if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a floating-point tensor, received {got}")
    per_step = (length, batch, width * 2)
    if tuple(weight_c.shape) not in ((2 * width,), per_step):
        raise _shape_error("weight_c", (2 * width,), weight_c, f" or per step {per_step}")
    if tuple(bias.shape) != (2 * width,):
        raise _shape_error("bias", (2 * width,), bias)
    for name, t in (("c0", c0), ("mask_c", mask_c)):
        if t is not None and tuple(t.shape) != (batch, width):
            raise _shape_error(name, (batch, width), t)
    if mask_pad is not None:
        if not isinstance(mask_pad, Tensor) or tuple(mask_pad.shape) != (length, batch):
            got = tuple(mask_pad.shape) if isinstance(mask_pad, Tensor) else type(mask_pad)
            raise ValueError(f"mask_pad must have shape {(length, batch)}, received {got}")
    return _ACTIVATIONS[activation]


def _resolve_backend(backend: str, U: Tensor) -> str:
    if exporting():
        return "export"
    if backend == "auto":
        if U.is_cuda:
            return "triton"
        return "cpu" if U.device.type == "cpu" and _cpu_kernel_available() else "reference"
    if backend == "cpu" and U.device.type != "cpu":
        raise ValueError(f"backend='cpu' needs CPU tensors, received U on {U.device}; use "
                         "backend='auto' or 'triton'")
    return backend


def _triton_recurrence():
    try:
        from .triton import elementwise_recurrence_triton
    except ImportError as exc:
        raise RuntimeError(f"the triton backend (needed for CUDA tensors) is unavailable: {exc}. "
                           "Install triton (`pip install triton`) or pass "
                           "backend='reference'") from exc
    return elementwise_recurrence_triton


def elementwise_recurrence(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Optional[Tensor],
    hidden_size: int,
    bidirectional: bool = False,
    has_skip_term: bool = True,
    scale_x: Union[float, Tensor] = 1.0,
    activation: Union[str, int] = "none",
    mask_c: Optional[Tensor] = None,
    mask_pad: Optional[Tensor] = None,
    backend: str = "auto",
) -> Tuple[Tensor, Tensor]:
    """Return ``(h, c_last)``: h (L, B, dirs*d), c_last (B, dirs*d).

    Arguments and layouts as ``elementwise_recurrence_reference`` (sru/ops/reference.py);
    ``activation`` may also be 0/1 like the ``sru`` package. Pass ``scale_x`` as a Python
    float under ``torch.compile`` (a tensor is read with ``float()``).
    """
    activation = _check_inputs(U, x, weight_c, bias, c0, hidden_size, bidirectional,
                               has_skip_term, activation, mask_c, mask_pad, backend)
    backend = _resolve_backend(backend, U)
    args = (U, x, weight_c, bias, c0, hidden_size, bidirectional, has_skip_term)
    if backend == "reference":
        return elementwise_recurrence_reference(*args, scale_x, activation, mask_c, mask_pad)
    if backend == "export":
        return elementwise_recurrence_scan(*args, scale_x, activation, mask_c, mask_pad)
    if backend == "cpu":
        return elementwise_recurrence_cpu(*args, float(scale_x), activation, mask_c, mask_pad)
    return _triton_recurrence()(*args, scale_x, activation, mask_c, mask_pad)
