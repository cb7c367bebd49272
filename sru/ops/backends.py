"""One table from backend name to the module that implements it, and how ``auto`` picks one.

Every module in ``MODULES`` exposes ``padded(U, x, weight_c, bias, c0, masks, spec)`` and
``packed(U, x, weight_c, bias, c0, masks, spec, layout)`` (sru/ops/spec.py). ``export`` is not
a user choice: while ``torch.onnx.export`` / ``torch.export`` trace, every backend runs as the
export form (a ``scan`` over time, sru/ops/export.py).
"""
from types import ModuleType

import torch
from torch import Tensor

import sru.ops.cpu as cpu_backend
import sru.ops.export as export_backend
import sru.ops.reference as reference_backend
from .cpu.build import cpu_kernel_available  # noqa: F401  (re-exported: sru.ops uses it from here)
from .export import exporting

BACKENDS = ("auto", "reference", "cpu", "triton")
MODULES = {"reference": "sru.ops.reference", "export": "sru.ops.export", "cpu": "sru.ops.cpu",
           "triton": "sru.ops.triton"}
_LOADED = {"reference": reference_backend, "export": export_backend, "cpu": cpu_backend}


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


def check_backend_name(backend) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, received {backend!r}")


def resolve_name(backend: str, U: Tensor) -> str:
    """The backend that runs: ``export`` while exporting, ``auto`` made concrete."""
    if exporting():
        return "export"
    if backend == "auto":
        if U.is_cuda:
            return "triton"
        return "cpu" if U.device.type == "cpu" and cpu_kernel_available() else "reference"
    if backend == "cpu" and U.device.type != "cpu":
        raise ValueError(f"backend='cpu' needs CPU tensors, received U on {U.device}; use "
                         "backend='auto' or 'triton'")
    return backend


def resolve(backend: str, U: Tensor) -> ModuleType:
    """The module of the backend that runs on U (see ``resolve_name``). A plain dict lookup
    (``importlib`` cannot be traced by torch.compile); triton's module is imported on first use."""
    name = resolve_name(backend, U)
    if name != "triton":
        return _LOADED[name]
    try:
        import sru.ops.triton as module
    except ImportError as exc:
        raise RuntimeError(f"the triton backend (needed for CUDA tensors) is unavailable: {exc}. "
                           "Install triton (`pip install triton`) or pass "
                           "backend='reference'") from exc
    return module
