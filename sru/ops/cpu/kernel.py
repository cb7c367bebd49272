"""Call the compiled kernel: allocate outputs with torch, pass raw pointers through ctypes.

Callers (sru/ops/cpu/autograd.py, packed.py, fused_layer.py) hand over contiguous float32 or
float64 CPU tensors of one dtype with shapes already checked (or, from the fused training layer under bf16
autocast, U in bf16 beside float32 tensors: the kernel widens it as it reads and writes grad U in bf16); this module only fills in the ``SruArgs`` struct that
mirrors the one in ``sru_recurrence.cpp``. ctypes releases the GIL during the call.
"""
import ctypes
from typing import NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..precision import widened_in_kernel

_POINTERS = ("U", "x", "weight_c", "bias", "c0", "mask_c", "mask_pad", "h", "c_all", "c_last",
             "grad_h", "grad_c_last", "grad_U", "grad_x", "grad_weight_c", "grad_bias",
             "grad_partial", "grad_c0", "grad_mask_c", "batch_sizes", "step_offsets")
_INTEGERS = ("length", "batch", "hidden", "dirs", "k", "per_step_weight", "skip_mode",
             "use_tanh", "num_threads")


class SruArgs(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_void_p) for name in _POINTERS]
                + [(name, ctypes.c_int64) for name in _INTEGERS]
                + [("scale_x", ctypes.c_double)])


def configure_library(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare the C signatures and check that the struct layouts agree."""
    lib.sru_args_size.restype = ctypes.c_int64
    if lib.sru_args_size() != ctypes.sizeof(SruArgs):
        raise RuntimeError(f"SruArgs layout mismatch: C++ {lib.sru_args_size()} bytes, "
                           f"Python {ctypes.sizeof(SruArgs)} bytes")
    for name in ("sru_forward_f32", "sru_forward_f64", "sru_backward_f32", "sru_backward_f64",
                 "sru_forward_f32_bf16u", "sru_backward_f32_bf16u"):
        getattr(lib, name).argtypes = [ctypes.POINTER(SruArgs)]
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _sizes(U: Tensor, packing: Optional[Tuple[Tensor, Tensor]]) -> Tuple[int, int, tuple]:
    """(length, batch, the shape of one per-token tensor without its last dim): (L, B) dense,
    or packed (N,) with L = len(batch_sizes), B = batch_sizes[0]."""
    if packing is None:
        return U.shape[0], U.shape[1], (U.shape[0], U.shape[1])
    batch_sizes = packing[0]
    return batch_sizes.numel(), int(batch_sizes[0]) if batch_sizes.numel() else 0, (U.shape[0],)


def skip_mode_of(cell) -> int:
    """A layer's kernel skip_mode: 0 no skip term, 1 x * scale_x (k = 3), 2 u3 (k = 4)."""
    return (1 if cell.num_matrices == 3 else 2) if cell.has_skip_term else 0


class KernelOptions(NamedTuple):
    """The integers and flags of ``SruArgs`` that describe the recurrence (a
    ``RecurrenceSpec`` resolved for one U: sru/ops/spec.py)."""

    hidden_size: int
    dirs: int
    skip_mode: int
    use_tanh: bool
    scale_x: float

    @classmethod
    def of(cls, spec, skip_mode: int) -> "KernelOptions":
        return cls(spec.hidden_size, spec.dirs, skip_mode, spec.use_tanh, float(spec.scale_x))


# The kernel's inputs, in this order: (U, x, weight_c, bias, c0, mask_c, mask_pad); x, c0 and
# the masks may be None.
_INPUTS = ("U", "x", "weight_c", "bias", "c0", "mask_c", "mask_pad")


def _args(inputs: Sequence[Optional[Tensor]], options: KernelOptions,
          packing: Optional[Tuple[Tensor, Tensor]], **outputs: Optional[Tensor]) -> SruArgs:
    U, weight_c = inputs[0], inputs[2]
    length, batch, _ = _sizes(U, packing)
    tensors = dict(zip(_INPUTS, inputs), **outputs)
    pointers = {name: (None if t is None else t.data_ptr()) for name, t in tensors.items()}
    if packing is not None:  # int64 CPU tensors, contiguous (sru/ops/packing.py)
        pointers["batch_sizes"], pointers["step_offsets"] = (t.data_ptr() for t in packing)
    hidden, dirs = options.hidden_size, options.dirs
    return SruArgs(length=length, batch=batch, hidden=hidden, dirs=dirs,
                   k=U.shape[-1] // (dirs * hidden), per_step_weight=int(weight_c.dim() > 1),
                   skip_mode=options.skip_mode, use_tanh=int(options.use_tanh),
                   num_threads=torch.get_num_threads(), scale_x=float(options.scale_x), **pointers)


def _call(lib: ctypes.CDLL, name: str, dtype: torch.dtype, args: SruArgs) -> None:
    """The entry for U's ``dtype``: float64, a bf16 U widened in the kernel, else float32."""
    suffix = "f64" if dtype == torch.float64 else ("f32_bf16u" if widened_in_kernel(dtype) else "f32")
    if getattr(lib, f"{name}_{suffix}")(ctypes.byref(args)) != 0:
        raise RuntimeError(f"sru CPU kernel {name}: unsupported k={args.k} with "
                           f"skip_mode={args.skip_mode}")


def forward(lib: ctypes.CDLL, inputs: Sequence[Optional[Tensor]], options: KernelOptions,
            store_c: bool, packing: Optional[Tuple[Tensor, Tensor]] = None
            ) -> Tuple[Tensor, Tensor, Tensor]:
    """Return ``(h, c_last, c_all)``; c_all (every step's c) is empty unless store_c.

    ``inputs``: ``(U, x, weight_c, bias, c0, mask_c, mask_pad)``. ``packing``: None for dense
    (L, B, .) tensors, or ``(batch_sizes, step_offsets)`` for the packed layout (U (N, dirs*d*k),
    h and c_all (N, dirs*d); sru/ops/packing.py). The outputs take weight_c's dtype (U's, unless U is bf16)."""
    U, state = inputs[0], inputs[2]
    _, batch, tokens = _sizes(U, packing)
    width = options.dirs * options.hidden_size
    h = state.new_empty(*tokens, width)
    c_last = state.new_empty(batch, width)
    c_all = state.new_empty((*tokens, width) if store_c else (0,))
    args = _args(inputs, options, packing, h=h, c_all=c_all if store_c else None, c_last=c_last)
    _call(lib, "sru_forward", U.dtype, args)
    return h, c_last, c_all


def backward(lib: ctypes.CDLL, grads: Tuple[Tensor, Optional[Tensor]],
             inputs: Sequence[Optional[Tensor]], c_all: Tensor, options: KernelOptions,
             need_grad_mask_c: bool, reuse: Tuple[Optional[Tensor], Optional[Tensor]] = (None, None),
             packing: Optional[Tuple[Tensor, Tensor]] = None
             ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Return grads ``(U, x, weight_c, bias, c0, mask_c)``; grad x is empty unless
    skip_mode == 1, grad mask_c unless need_grad_mask_c (and mask_c is given).

    ``grads``: ``(grad_h, grad_c_last)``; grad_c_last None means zeros (c_last unused), without
    allocating them. ``reuse``: optional output buffers ``(grad_U, grad_x)``, which may be ``U``
    / ``c_all`` themselves: the kernel reads each element of U and of c_all at step t before it
    writes that element's gradient, and never reads it again, so it can overwrite them in
    place. That spares two large allocations whose fresh pages the OS would have to fault in.
    ``packing`` as in ``forward``. grad U takes U's dtype, every other gradient weight_c's.
    """
    grad_h, grad_c_last = grads
    U, weight_c, bias, mask_c = inputs[0], inputs[2], inputs[3], inputs[5]
    grad_U, grad_x = reuse
    skip_mode = options.skip_mode
    _, batch, tokens = _sizes(U, packing)
    width = options.dirs * options.hidden_size
    # The kernel writes every element (padded steps included): no zero-fill needed.
    if grad_U is None:
        grad_U = torch.empty_like(U)
    if grad_x is None or skip_mode != 1:
        grad_x = weight_c.new_empty((*tokens, width) if skip_mode == 1 else (0,))
    grad_weight_c = torch.empty_like(weight_c)
    grad_bias = torch.empty_like(bias)
    grad_c0 = weight_c.new_empty(batch, width)
    need_grad_mask_c = need_grad_mask_c and mask_c is not None
    grad_mask_c = weight_c.new_empty((batch, width) if need_grad_mask_c else (0,))
    partial = weight_c.new_empty(batch, 4, width)  # scratch: per batch row sums, reduced in the kernel
    args = _args(inputs, options, packing, c_all=c_all, grad_h=grad_h, grad_c_last=grad_c_last,
                 grad_U=grad_U, grad_x=grad_x if skip_mode == 1 else None,
                 grad_weight_c=grad_weight_c, grad_bias=grad_bias, grad_partial=partial,
                 grad_c0=grad_c0, grad_mask_c=grad_mask_c if need_grad_mask_c else None)
    _call(lib, "sru_backward", U.dtype, args)
    return grad_U, grad_x, grad_weight_c, grad_bias, grad_c0, grad_mask_c
