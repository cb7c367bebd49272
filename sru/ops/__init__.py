"""One entry point for the SRU elementwise recurrence, dispatching to a backend.

Backends (one table, sru/ops/backends.py): ``reference`` (PyTorch loop, the specification), ``cpu``
(fused C++/OpenMP kernel, built on first use), ``triton`` (fused GPU kernel). ``auto`` picks
triton for CUDA tensors, cpu for CPU tensors when the kernel builds, else the reference (after
one warning). While ``torch.onnx.export`` / ``torch.export`` trace, every backend runs as the
export form: a ``scan`` over time kept as one loop (sru/ops/export.py). Each backend takes the
tensors, ``Masks`` and a ``RecurrenceSpec`` (sru/ops/spec.py).
"""
from typing import Optional, Tuple, Union

from torch import Tensor

from .backends import (BACKENDS, LIBRARIES, available_backends, check_backend_name, check_library,
                       clear_cpu_gemm_cache, cpu_gemm_report, linear, matmul, resolve)
from .reference import elementwise_recurrence_reference
from .spec import Masks, RecurrenceSpec, split_flat

__all__ = ["BACKENDS", "LIBRARIES", "Masks", "RecurrenceSpec", "available_backends", "check_library",
           "clear_cpu_gemm_cache", "cpu_gemm_report", "linear", "matmul",
           "elementwise_recurrence", "elementwise_recurrence_reference"]


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
    float under ``torch.compile`` (a tensor is read with ``float()`` by the CPU kernel).
    """
    check_backend_name(backend)
    args = split_flat(U, x, weight_c, bias, c0, hidden_size, bidirectional, has_skip_term,
                      scale_x, activation, mask_c, mask_pad)
    return resolve(backend, U).padded(*args)
