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

The kernels (sru/ops/triton/kernels.py) are jitted lazily on first use (not at import), so
``import sru.ops.triton`` works without triton, and TRITON_INTERPRET=1 only has to be set before
the first call.
"""
import contextlib
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..precision import half_recurrence
from ..spec import Masks, RecurrenceSpec, needs_history, split_flat
from .kernels import SKIP_X, compiled_kernels, triton
from .launch import launch


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def launch_config(n_columns: int) -> Tuple[int, int, int]:
    """(BLOCK, num_warps, grid): one column per thread, 32..128 columns (1..4 warps) a program.

    Each step's loads wait a full memory latency (the loop is sequential), so the latency is
    hidden by many resident warps, not by work per thread: small problems get 1-warp programs
    spread over all SMs, large ones ~1024+ programs of 4 warps. Untuned: see docs/gpu.md."""
    block = triton.next_power_of_2(max(1, triton.cdiv(n_columns, 1024)))
    block = max(32, min(128, block))
    return block, block // 32, triton.cdiv(n_columns, block)


def on_device(t: Tensor):
    """Launch on the tensors' own GPU (Triton uses that device's current stream)."""
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def compute_dtype(U: Tensor) -> torch.dtype:
    return torch.float64 if U.dtype == torch.float64 else torch.float32


def scale_args(scale_x: Optional[Tensor], like: Tensor):
    # A tensor scale_x is read inside the kernel (see kernel_scale); else a dummy pointer.
    return (scale_x, True) if scale_x is not None else (like, False)


# ---------------------------------------------------------------------------------------------
# Custom ops: the kernels wrapped for autograd, torch.compile (fake impls) and the dispatcher.

@torch.library.custom_op("sru_triton::recurrence_forward", mutates_args=())
def recurrence_forward(
    U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Tensor,
    mask_c: Optional[Tensor], mask_pad: Optional[Tensor], scale_x: Optional[Tensor],
    scale_value: float, hidden_size: int, skip: int, tanh: bool, store_history: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Returns (h, c_last, c history); the history is empty unless store_history."""
    forward_kernel, _ = compiled_kernels()
    length, batch = U.shape[0], U.shape[1]
    dd = c0.shape[1]
    k = U.shape[2] // dd
    h = torch.empty(length, batch, dd, dtype=U.dtype, device=U.device)
    c_all = torch.empty(length if store_history else 0, batch, dd, dtype=compute_dtype(U),
                        device=U.device)
    c_last = torch.empty(batch, dd, dtype=U.dtype, device=U.device)
    if length == 0 or batch * dd == 0:
        c_last.copy_(c0)
        return h, c_last, c_all
    block, num_warps, grid = launch_config(batch * dd)
    scale_ptr, scale_from_ptr = scale_args(scale_x, U)
    with on_device(U):
        launch(forward_kernel, (grid,), "forward", U.device, (
            U, U if x is None else x, weight_c, bias, c0, U if mask_c is None else mask_c,
            U if mask_pad is None else mask_pad, scale_ptr, h, c_all, c_last,
            length, batch, hidden_size, dd, scale_value), dict(
            K=k, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
            HAS_MASK_PAD=mask_pad is not None, PER_STEP_W=weight_c.dim() > 1,
            SCALE_FROM_PTR=scale_from_ptr, STORE_C=store_history, FP64=U.dtype == torch.float64,
            BLOCK=block, num_warps=num_warps),
            layer=f"hidden_size={hidden_size}, directions={dd // hidden_size}")
    return h, c_last, c_all


@recurrence_forward.register_fake
def _(U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, scale_value, hidden_size, skip, tanh,
      store_history):
    length, batch, dd = U.shape[0], U.shape[1], c0.shape[1]
    return (U.new_empty(length, batch, dd), U.new_empty(batch, dd),
            U.new_empty(length if store_history else 0, batch, dd, dtype=compute_dtype(U)))


@torch.library.custom_op("sru_triton::recurrence_backward", mutates_args=())
def recurrence_backward(
    grad_h: Tensor, grad_c_last: Tensor, U: Tensor, x: Optional[Tensor], weight_c: Tensor,
    bias: Tensor, c0: Tensor, mask_c: Optional[Tensor], mask_pad: Optional[Tensor],
    scale_x: Optional[Tensor], c_all: Tensor, scale_value: float, hidden_size: int, skip: int,
    tanh: bool, need_grad_mask_c: bool,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Returns grads of (U, x, weight_c, bias, c0, mask_c); x/mask_c grads are empty if unused."""
    _, backward_kernel = compiled_kernels()
    length, batch = U.shape[0], U.shape[1]
    dd = c0.shape[1]
    k = U.shape[2] // dd
    acc = compute_dtype(U)
    per_step = weight_c.dim() > 1
    grad_U = torch.empty_like(U)
    grad_x = torch.empty_like(x) if skip == SKIP_X else U.new_empty(0)
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
        block, num_warps, grid = launch_config(batch * dd)
        scale_ptr, scale_from_ptr = scale_args(scale_x, U)
        with on_device(U):
            launch(backward_kernel, (grid,), "backward", U.device, (
                grad_h, grad_c_last, U, U if x is None else x, weight_c, bias, c0,
                U if mask_c is None else mask_c, U if mask_pad is None else mask_pad, scale_ptr,
                c_all, grad_U, grad_x if grad_x.numel() else U, grad_wc if per_step else U,
                grad_c0, grad_mask_c if need_grad_mask_c else U, part_w, part_b,
                length, batch, hidden_size, dd, scale_value), dict(
                K=k, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
                HAS_MASK_PAD=mask_pad is not None, PER_STEP_W=per_step,
                SCALE_FROM_PTR=scale_from_ptr, NEED_GRAD_MASK_C=need_grad_mask_c,
                FP64=U.dtype == torch.float64, BLOCK=block, num_warps=num_warps),
                layer=f"hidden_size={hidden_size}, directions={dd // hidden_size}")
    # Deterministic reduction of the per-(batch, column) partial sums.
    grad_bias = part_b.sum(0).to(bias.dtype)
    if not per_step:
        grad_wc = part_w.sum(0).to(weight_c.dtype)
    return grad_U, grad_x, grad_wc, grad_bias, grad_c0, grad_mask_c


@recurrence_backward.register_fake
def _(grad_h, grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all,
      scale_value, hidden_size, skip, tanh, need_grad_mask_c):
    return (torch.empty_like(U), torch.empty_like(x) if skip == SKIP_X else U.new_empty(0),
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
    g_U, g_x, g_wc, g_bias, g_c0, g_mask_c = recurrence_backward(
        grad_h, grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all,
        scale_value, hidden_size, skip, tanh, need_grad_mask_c)
    return (g_U, g_x if skip == SKIP_X else None, g_wc, g_bias, g_c0,
            g_mask_c if need_grad_mask_c else None, None, None, None, None, None, None, None)


recurrence_forward.register_autograd(_backward, setup_context=_setup_context)


# ---------------------------------------------------------------------------------------------
# Backend entries.

def check_device(U: Tensor, *tensors: Optional[Tensor]) -> None:
    """CUDA tensors (CPU only under the interpreter), all on U's device."""
    if not U.is_cuda and not _interpreting():
        raise RuntimeError("the triton backend runs on CUDA tensors; for CPU tensors set "
                           "TRITON_INTERPRET=1 (slow, for tests) or use backend='cpu'.")
    for t in tensors:
        if t is not None and t.device != U.device:
            raise ValueError(f"elementwise_recurrence_triton: every input must be on {U.device} "
                             f"like U, got one of shape {tuple(t.shape)} on {t.device}")


def kernel_scale(scale_x, U: Tensor) -> Tuple[Optional[Tensor], float]:
    """``(scale tensor or None, scale value)``: a tensor scale_x (the module's buffer) is read
    inside the kernel, so no .item() sync per call; a float is a kernel argument, which is
    fp32, so fp64 inputs get it as a tensor to stay exact."""
    if isinstance(scale_x, Tensor):
        if scale_x.numel() != 1:
            raise ValueError(f"scale_x must be a float or a 1-element tensor, got shape "
                             f"{tuple(scale_x.shape)}")
        return scale_x.detach().reshape(1).to(device=U.device), 1.0
    value = float(scale_x)
    if U.dtype == torch.float64:
        return torch.tensor([value], dtype=torch.float64, device=U.device), value
    return None, value


def padded(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor,
           c0: Optional[Tensor], masks: Masks, spec: RecurrenceSpec,
           amp_recurrence_fp16: bool = False) -> Tuple[Tensor, Tensor]:
    """``reference.padded`` on the fused kernels (inputs validated by the caller).

    ``h`` and ``c_last`` come back in U's dtype; the state and all arithmetic are fp32 (fp64
    for fp64 U). ``spec.scale_x`` may be a float or a 1-element tensor; it is a constant (no
    gradient), as in the official package. ``amp_recurrence_fp16`` (official meaning): when U
    is fp16 (e.g. from a matmul under autocast), the other recurrence inputs (x, weight_c,
    bias, c0, mask_c) are cast to fp16 too, so everything the kernel reads is half precision;
    arithmetic still runs in fp32.
    """
    mask_c, mask_pad = masks
    check_device(U, x, weight_c, bias, c0, mask_c, mask_pad)
    skip, x = spec.skip_input(U, x)
    if half_recurrence(U.dtype, amp_recurrence_fp16):
        half = lambda t: None if t is None else t.half()  # noqa: E731
        x, weight_c, bias, c0, mask_c = half(x), half(weight_c), half(bias), half(c0), half(mask_c)
    if c0 is None:
        c0 = U.new_zeros(U.shape[1], spec.width)
    if mask_pad is not None:  # any nonzero = padded; a byte per step is all the kernel reads
        mask_pad = mask_pad.ne(0).to(torch.uint8).contiguous()
    scale_t, scale_value = kernel_scale(spec.scale_x, U)
    # Inference needs no c history: skip writing it (a quarter of the forward's traffic).
    store_history = needs_history(U, x, weight_c, bias, c0, mask_c)
    contig = lambda t: None if t is None else t.contiguous()  # noqa: E731
    h, c_last, _ = recurrence_forward(
        U.contiguous(), contig(x), weight_c.contiguous(), bias.contiguous(), c0.contiguous(),
        contig(mask_c), mask_pad, scale_t, scale_value, spec.hidden_size, skip, spec.use_tanh,
        store_history)
    return h, c_last


def elementwise_recurrence_triton(*args, amp_recurrence_fp16: bool = False, **kwargs):
    """``padded`` with the flat arguments of ``sru.ops.spec.split_flat`` ``(U, x, weight_c,
    bias, c0, hidden_size, bidirectional=False, has_skip_term=True, scale_x=1.0,
    activation='none', mask_c=None, mask_pad=None)``. Returns ``(h, c_last)`` exactly as
    ``elementwise_recurrence_reference`` does. A CPU U without TRITON_INTERPRET=1 is refused
    before anything else is checked."""
    U = args[0] if args else kwargs.get("U")
    if isinstance(U, Tensor) and U.dim() == 3:
        check_device(U)
    return padded(*split_flat(*args, **kwargs), amp_recurrence_fp16=amp_recurrence_fp16)
