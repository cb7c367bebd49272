"""The fused CPU forward as a C++ dispatcher op, ``sru_cpp::recurrence_forward``, for export.

Why: ``torch.export`` records ops of the dispatcher; the ``sru::`` ops of autograd.py are
Python functions that call the kernel through ctypes, which an AOTInductor package run from C++
(no Python) cannot call. ``sru_torch_op.cpp`` registers the same kernel with
``TORCH_LIBRARY``, in a library built here on first use (cached and published atomically as
build.py does; the name hashes the sources, flags, torch version and CPU). While
``torch.export`` traces a model on CPU, sru/ops/export.py calls this op instead of scanning the
reference, so the exported graph, and an AOTInductor package compiled from it, run the fused
kernel. A C++ program loads the library named by ``op_library_path()`` before the package
(docs/deploy.md#aotinductor-from-c).

``SRU_EXPORT_FUSED=0`` keeps the decomposed form (a ``scan`` of the reference step), which
needs no library. ONNX export always uses the scan (ONNX has no operator for the kernel).
"""
import os
import threading
import warnings
from pathlib import Path
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..spec import Masks, RecurrenceSpec
from .build import SOURCE, build_extension, library_path, short_log

OP_SOURCES = (SOURCE.with_name("sru_torch_op.cpp"), SOURCE)
_lock = threading.Lock()
_state = {"loaded": False, "error": None}


def op_library_path() -> Path:
    """Where the op library is (or will be) cached: the file a C++ program must load."""
    return library_path("sru_op", OP_SOURCES)


def _register_fake() -> None:
    @torch.library.register_fake("sru_cpp::recurrence_forward")
    def _(U, x, weight_c, bias, c0, mask_c, mask_pad, hidden_size, dirs, skip_mode, use_tanh,
          scale_x):
        width = dirs * hidden_size
        return U.new_empty(U.shape[0], U.shape[1], width), U.new_empty(U.shape[1], width)


def load_op_library() -> Optional[Path]:
    """Build (once) and load the op library; its path, or None after one warning."""
    if _state["loaded"] or _state["error"] is not None:
        return op_library_path() if _state["loaded"] else None
    with _lock:
        if _state["loaded"] or _state["error"] is not None:
            return op_library_path() if _state["loaded"] else None
        target = op_library_path()
        try:
            if not target.exists():
                build_extension(target, OP_SOURCES)
            torch.ops.load_library(str(target))
            _register_fake()
            _state["loaded"] = True
        except Exception as exc:  # no compiler, or torch headers missing: keep the scan
            _state["error"] = f"{type(exc).__name__}: {short_log(exc)}"
            warnings.warn("sru: could not build the sru_cpp custom-op library, so torch.export "
                          f"keeps the decomposed recurrence (a scan).\n  What failed: "
                          f"{_state['error']}\n  Fix: install a C++ compiler and ninja; set "
                          "SRU_EXPORT_FUSED=0 to silence this.", RuntimeWarning, stacklevel=3)
            return None
    return target


def op_error() -> Optional[str]:
    """Why the op library is unavailable (None if it loaded or was never tried)."""
    return _state["error"]


def fused_export_wanted(U: Tensor) -> bool:
    """Whether an export in progress should record ``sru_cpp::recurrence_forward`` for U."""
    return (torch.compiler.is_exporting() and not torch.onnx.is_in_onnx_export()
            and U.device.type == "cpu" and os.environ.get("SRU_EXPORT_FUSED", "1") != "0"
            and load_op_library() is not None)


def padded(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Optional[Tensor],
           masks: Masks, spec: RecurrenceSpec) -> Tuple[Tensor, Tensor]:
    """The recurrence as one ``sru_cpp`` op call: same results as ``reference.padded``.
    Inference only: the inputs are detached (an exported program is for inference, and the
    op has no autograd formula)."""
    skip_mode, x = spec.skip_input(U, x)
    detach = (lambda t: None if t is None else t.detach())
    return torch.ops.sru_cpp.recurrence_forward(
        U.detach(), detach(x), weight_c.detach(), bias.detach(), detach(c0),
        detach(masks.mask_c), masks.mask_pad, spec.hidden_size, spec.dirs, skip_mode,
        spec.use_tanh, float(spec.scale_x))


__all__ = ["fused_export_wanted", "load_op_library", "op_error", "op_library_path", "padded"]
