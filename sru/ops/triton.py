"""The SRU elementwise recurrence as fused Triton kernels (GPU; CPU under TRITON_INTERPRET=1).

Same arguments, layouts and semantics as ``elementwise_recurrence_reference`` in
``sru/ops/reference.py`` (read that first). One forward and one backward kernel:

* Work is split over columns ``j`` of the flattened (B, dirs*d) state: each program owns
  BLOCK columns, both directions in ONE launch. A column's direction (``j % (dirs*d) >= d``
  means backward) decides whether it walks time forwards or backwards; the loop over time is
  sequential and the state ``c`` stays in registers.
* Forward stores every ``c_t`` (L, B, dirs*d) in fp32 (fp64 for fp64 inputs) so the backward
  can recompute the gates in reverse time instead of storing them (docs/spec.md#backward).
* Gradients of the shared ``weight_c``/``bias`` are accumulated per column in registers over
  time and written as per-(batch, column) partial sums (B, 2*dirs*d), then reduced with
  ``torch.sum``: deterministic, no atomics. Per-step ``weight_c`` (L, B, dirs*d*2) gets its
  gradient per (t, b, column) directly.
* Precision: inputs may be fp32/fp16/bf16 (fp64 for gradcheck); every load is converted to the
  fp32 (fp64) compute type, outputs are stored in U's dtype, gradients in each input's dtype.

The kernels (sru/ops/triton_kernels.py) are jitted lazily on first use (not at import), so
``import sru.ops.triton`` works without triton, and TRITON_INTERPRET=1 only has to be set before
the first call.
"""
import contextlib
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from .shapes import num_directions
from .triton_kernels import (  # noqa: F401  (re-exported: tests and scripts/check_gpu.py use them)
    _SKIP_NONE, _SKIP_U3, _SKIP_X, _kernels, triton)

if triton is not None:
    from .triton_kernels import _sru_backward_kernel, _sru_forward_kernel  # noqa: F401


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _launch_config(n_columns: int) -> Tuple[int, int, int]:
    """(BLOCK, num_warps, grid): one column per thread, 32..128 columns (1..4 warps) a program.

    Each step's loads wait a full memory latency (the loop is sequential), so the latency is
    hidden by many resident warps, not by work per thread: small problems get 1-warp programs
    spread over all SMs, large ones ~1024+ programs of 4 warps. Untuned: see docs/gpu.md."""
    block = triton.next_power_of_2(max(1, triton.cdiv(n_columns, 1024)))
    block = max(32, min(128, block))
    return block, block // 32, triton.cdiv(n_columns, block)


def _on_device(t: Tensor):
    """Launch on the tensors' own GPU (Triton uses that device's current stream)."""
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def _compute_dtype(U: Tensor) -> torch.dtype:
    return torch.float64 if U.dtype == torch.float64 else torch.float32


def _scale_args(scale_x: Optional[Tensor], like: Tensor):
    # A tensor scale_x (the module's buffer) is read inside the kernel: no .item() sync per call.
    return (scale_x, True) if scale_x is not None else (like, False)


# ---------------------------------------------------------------------------------------------
# Custom ops: the kernels wrapped for autograd, torch.compile (fake impls) and the dispatcher.

@torch.library.custom_op("sru_triton::recurrence_forward", mutates_args=())
def _recurrence_forward(
    U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Tensor,
    mask_c: Optional[Tensor], mask_pad: Optional[Tensor], scale_x: Optional[Tensor],
    scale_value: float, hidden_size: int, skip: int, tanh: bool, store_history: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Returns (h, c_last, c history); the history is empty unless store_history."""
    forward_kernel, _ = _kernels()
    length, batch = U.shape[0], U.shape[1]
    dd = c0.shape[1]
    k = U.shape[2] // dd
    h = torch.empty(length, batch, dd, dtype=U.dtype, device=U.device)
    c_all = torch.empty(length if store_history else 0, batch, dd, dtype=_compute_dtype(U),
                        device=U.device)
    c_last = torch.empty(batch, dd, dtype=U.dtype, device=U.device)
    if length == 0 or batch * dd == 0:
        c_last.copy_(c0)
        return h, c_last, c_all
    block, num_warps, grid = _launch_config(batch * dd)
    scale_ptr, scale_from_ptr = _scale_args(scale_x, U)
    with _on_device(U):
        forward_kernel[(grid,)](
            U, U if x is None else x, weight_c, bias, c0, U if mask_c is None else mask_c,
            U if mask_pad is None else mask_pad, scale_ptr, h, c_all, c_last,
            length, batch, hidden_size, dd, scale_value,
            K=k, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
            HAS_MASK_PAD=mask_pad is not None, PER_STEP_W=weight_c.dim() > 1,
            SCALE_FROM_PTR=scale_from_ptr, STORE_C=store_history, FP64=U.dtype == torch.float64,
            BLOCK=block, num_warps=num_warps,
        )
    return h, c_last, c_all


@_recurrence_forward.register_fake
def _(U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, scale_value, hidden_size, skip, tanh,
      store_history):
    length, batch, dd = U.shape[0], U.shape[1], c0.shape[1]
    return (U.new_empty(length, batch, dd), U.new_empty(batch, dd),
            U.new_empty(length if store_history else 0, batch, dd, dtype=_compute_dtype(U)))


@torch.library.custom_op("sru_triton::recurrence_backward", mutates_args=())
def _recurrence_backward(
    grad_h: Tensor, grad_c_last: Tensor, U: Tensor, x: Optional[Tensor], weight_c: Tensor,
    bias: Tensor, c0: Tensor, mask_c: Optional[Tensor], mask_pad: Optional[Tensor],
    scale_x: Optional[Tensor], c_all: Tensor, scale_value: float, hidden_size: int, skip: int,
    tanh: bool, need_grad_mask_c: bool,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Returns grads of (U, x, weight_c, bias, c0, mask_c); x/mask_c grads are empty if unused."""
    _, backward_kernel = _kernels()
    length, batch = U.shape[0], U.shape[1]
    dd = c0.shape[1]
    k = U.shape[2] // dd
    acc = _compute_dtype(U)
    per_step = weight_c.dim() > 1
    grad_U = torch.empty_like(U)
    grad_x = torch.empty_like(x) if skip == _SKIP_X else U.new_empty(0)
    grad_wc = torch.empty_like(weight_c) if per_step else U.new_empty(0)
    grad_c0 = torch.empty_like(c0)
    grad_mask_c = torch.empty_like(mask_c) if need_grad_mask_c else U.new_empty(0)
    part_w = torch.empty(batch, 2 * dd, dtype=acc, device=U.device)
    part_b = torch.empty(batch, 2 * dd, dtype=acc, device=U.device)
    if length == 0 or batch * dd == 0:
        for t in (grad_U, grad_x, grad_wc, grad_mask_c, part_w, part_b):
            t.zero_()
        grad_c0.copy_(grad_c_last)
    else:
        block, num_warps, grid = _launch_config(batch * dd)
        scale_ptr, scale_from_ptr = _scale_args(scale_x, U)
        with _on_device(U):
            backward_kernel[(grid,)](
                grad_h, grad_c_last, U, U if x is None else x, weight_c, bias, c0,
                U if mask_c is None else mask_c, U if mask_pad is None else mask_pad, scale_ptr,
                c_all, grad_U, grad_x if grad_x.numel() else U, grad_wc if per_step else U,
                grad_c0, grad_mask_c if need_grad_mask_c else U, part_w, part_b,
                length, batch, hidden_size, dd, scale_value,
                K=k, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
                HAS_MASK_PAD=mask_pad is not None, PER_STEP_W=per_step,
                SCALE_FROM_PTR=scale_from_ptr, NEED_GRAD_MASK_C=need_grad_mask_c,
                FP64=U.dtype == torch.float64, BLOCK=block, num_warps=num_warps,
            )
    # Deterministic reduction of the per-(batch, column) partial sums.
    grad_bias = part_b.sum(0).to(bias.dtype)
    if not per_step:
        grad_wc = part_w.sum(0).to(weight_c.dtype)
    return grad_U, grad_x, grad_wc, grad_bias, grad_c0, grad_mask_c


@_recurrence_backward.register_fake
def _(grad_h, grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all,
      scale_value, hidden_size, skip, tanh, need_grad_mask_c):
    return (torch.empty_like(U), torch.empty_like(x) if skip == _SKIP_X else U.new_empty(0),
            torch.empty_like(weight_c), torch.empty_like(bias), torch.empty_like(c0),
            torch.empty_like(mask_c) if need_grad_mask_c else U.new_empty(0))


def _setup_context(ctx, inputs, output):
    (U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, scale_value, hidden_size, skip, tanh,
     store_history) = inputs
    if not store_history:
        raise RuntimeError("sru_triton::recurrence_forward was called with store_history=False "
                           "while gradients are required; call elementwise_recurrence_triton")
    ctx.save_for_backward(U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, output[2])
    ctx.args = (scale_value, hidden_size, skip, tanh)


def _backward(ctx, grad_h, grad_c_last, _grad_c_all):
    U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all = ctx.saved_tensors
    scale_value, hidden_size, skip, tanh = ctx.args
    grad_h = torch.zeros_like(c_all, dtype=U.dtype) if grad_h is None else grad_h.contiguous()
    grad_c_last = torch.zeros_like(c0) if grad_c_last is None else grad_c_last.contiguous()
    need_grad_mask_c = mask_c is not None and ctx.needs_input_grad[5]
    g_U, g_x, g_wc, g_bias, g_c0, g_mask_c = _recurrence_backward(
        grad_h, grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all,
        scale_value, hidden_size, skip, tanh, need_grad_mask_c)
    return (g_U, g_x if skip == _SKIP_X else None, g_wc, g_bias, g_c0,
            g_mask_c if need_grad_mask_c else None, None, None, None, None, None, None, None)


_recurrence_forward.register_autograd(_backward, setup_context=_setup_context)


# ---------------------------------------------------------------------------------------------
# Public entry point.

def _check(name: str, t: Optional[Tensor], shapes, device) -> None:
    if t is None:
        return
    if tuple(t.shape) not in [tuple(s) for s in shapes]:
        want = " or ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"elementwise_recurrence_triton: {name} must have shape {want}, "
                         f"got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"elementwise_recurrence_triton: {name} must be on {device} like U, "
                         f"got {t.device}")


def elementwise_recurrence_triton(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Optional[Tensor],
    hidden_size: int,
    bidirectional: bool = False,
    has_skip_term: bool = True,
    scale_x=1.0,
    activation="none",
    mask_c: Optional[Tensor] = None,
    mask_pad: Optional[Tensor] = None,
    amp_recurrence_fp16: bool = False,
) -> Tuple[Tensor, Tensor]:
    """Return ``(h, c_last)`` exactly as ``elementwise_recurrence_reference`` does.

    ``h`` and ``c_last`` come back in U's dtype; the state and all arithmetic are fp32 (fp64
    for fp64 U). ``scale_x`` may be a float or a 1-element tensor (the module's buffer, read on
    the device without a sync); it is a constant (no gradient), as in the official package.
    ``amp_recurrence_fp16`` (official meaning): when U is fp16 (e.g. from a matmul under
    autocast), the other recurrence inputs (x, weight_c, bias, c0, mask_c) are cast to fp16 too,
    so everything the kernel reads is half precision; arithmetic still runs in fp32.
    """
    if U.dim() != 3:
        raise ValueError(f"elementwise_recurrence_triton: U must be (L, B, dirs*d*k), got shape "
                         f"{tuple(U.shape)}")
    if not U.is_cuda and not _interpreting():
        raise RuntimeError("elementwise_recurrence_triton runs on CUDA tensors; for CPU tensors "
                           "set TRITON_INTERPRET=1 (slow, for tests) or use backend='cpu'.")
    if activation not in ("none", "tanh", 0, 1):
        raise ValueError(f"activation must be 'none' or 'tanh' (or 0/1), got {activation!r}")
    tanh = activation in ("tanh", 1)
    dirs = num_directions(bidirectional)
    dd = dirs * hidden_size
    length, batch = U.shape[0], U.shape[1]
    if hidden_size <= 0 or U.shape[2] not in (3 * dd, 4 * dd):
        raise ValueError(f"elementwise_recurrence_triton: U's last dim must be dirs*d*k = "
                         f"{3 * dd} or {4 * dd} (k=3/4, d={hidden_size}, dirs={dirs}), "
                         f"got {U.shape[2]}")
    k = U.shape[2] // dd
    skip = _SKIP_NONE if not has_skip_term else (_SKIP_X if k == 3 else _SKIP_U3)
    if skip == _SKIP_X and x is None:
        raise ValueError("elementwise_recurrence_triton: x (L, B, dirs*d) is required when "
                         "has_skip_term=True and k == 3; pass x or set has_skip_term=False")
    if skip != _SKIP_X:
        x = None  # not read by the kernel
    dev = U.device
    _check("x", x, [(length, batch, dd)], dev)
    _check("weight_c", weight_c, [(2 * dd,), (length, batch, 2 * dd)], dev)
    _check("bias", bias, [(2 * dd,)], dev)
    _check("c0", c0, [(batch, dd)], dev)
    _check("mask_c", mask_c, [(batch, dd)], dev)
    _check("mask_pad", mask_pad, [(length, batch)], dev)

    if amp_recurrence_fp16 and U.dtype == torch.float16:
        half = lambda t: None if t is None else t.half()  # noqa: E731
        x, weight_c, bias, c0, mask_c = half(x), half(weight_c), half(bias), half(c0), half(mask_c)
    if c0 is None:
        c0 = U.new_zeros(batch, dd)
    if mask_pad is not None:  # any nonzero = padded; a byte per step is all the kernel reads
        mask_pad = mask_pad.ne(0).to(torch.uint8).contiguous()
    scale_t = None
    scale_value = 1.0
    if isinstance(scale_x, Tensor):
        if scale_x.numel() != 1:
            raise ValueError(f"scale_x must be a float or a 1-element tensor, got shape "
                             f"{tuple(scale_x.shape)}")
        scale_t = scale_x.detach().reshape(1).to(device=dev)
    else:
        scale_value = float(scale_x)
        if U.dtype == torch.float64:  # a float kernel argument is fp32; keep fp64 exact
            scale_t = torch.tensor([scale_value], dtype=torch.float64, device=dev)

    # Inference needs no c history: skip writing it (a quarter of the forward's traffic).
    store_history = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (U, x, weight_c, bias, c0, mask_c))
    contig = lambda t: None if t is None else t.contiguous()  # noqa: E731
    h, c_last, _ = _recurrence_forward(
        U.contiguous(), contig(x), weight_c.contiguous(), bias.contiguous(), c0.contiguous(),
        contig(mask_c), mask_pad, scale_t, scale_value, hidden_size, skip, tanh, store_history)
    return h, c_last
