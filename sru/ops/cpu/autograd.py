"""The fused CPU kernel as ``torch.library`` custom ops with autograd.

``sru::recurrence_fwd`` and ``sru::recurrence_bwd`` are opaque to ``torch.compile`` (their
fake implementations give output shapes), and ``register_autograd`` wires the backward op
in, so a compiled graph (``fullgraph=True``) runs the same kernels as eager mode.

``padded`` (the backend entry, sru/ops/spec.py) prepares inputs for the ops: one compute
dtype (float64 stays float64, every other float dtype is computed in float32), contiguous
tensors, a uint8 padding mask; outputs go back to U's dtype and autograd casts grads back to
each input's dtype. Inputs are assumed validated (``sru.ops.spec.check_padded``).
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..shapes import num_directions, state_width
from ..spec import NO_SKIP, SKIP_FROM_U, SKIP_SCALED_X, Masks, RecurrenceSpec, needs_history
from .kernel import KernelOptions, backward as kernel_backward, forward as kernel_forward
from .build import load_error, load_library

__all__ = ["NO_SKIP", "SKIP_FROM_U", "SKIP_SCALED_X", "padded", "recurrence_bwd", "recurrence_fwd"]


def require_library():
    lib = load_library()
    if lib is None:
        raise RuntimeError(f"sru: the fused CPU kernel is unavailable ({load_error()}); "
                           "use backend='reference' or backend='auto'")
    return lib


@torch.library.custom_op("sru::recurrence_fwd", mutates_args=(), device_types="cpu")
def recurrence_fwd(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor,
                   c0: Optional[Tensor], mask_c: Optional[Tensor], mask_pad: Optional[Tensor],
                   hidden_size: int, bidirectional: bool, skip_mode: int, use_tanh: bool,
                   scale_x: float, store_c: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """Return ``(h, c_last, c_all)``; c_all holds every step's c when store_c, else is empty."""
    options = KernelOptions(hidden_size, num_directions(bidirectional), skip_mode,
                                   use_tanh, scale_x)
    return kernel_forward(require_library(), (U, x, weight_c, bias, c0, mask_c, mask_pad), options,
                          store_c)


@recurrence_fwd.register_fake
def _(U, x, weight_c, bias, c0, mask_c, mask_pad, hidden_size, bidirectional, skip_mode,
      use_tanh, scale_x, store_c):
    length, batch, width = U.shape[0], U.shape[1], state_width(hidden_size, bidirectional)
    c_all = U.new_empty((length, batch, width) if store_c else (0,))
    return U.new_empty(length, batch, width), U.new_empty(batch, width), c_all


@torch.library.custom_op("sru::recurrence_bwd", mutates_args=(), device_types="cpu")
def recurrence_bwd(grad_h: Tensor, grad_c_last: Optional[Tensor], U: Tensor, x: Optional[Tensor],
                   weight_c: Tensor, bias: Tensor, c0: Optional[Tensor], mask_c: Optional[Tensor],
                   mask_pad: Optional[Tensor], c_all: Tensor, hidden_size: int,
                   bidirectional: bool, skip_mode: int, use_tanh: bool, scale_x: float,
                   need_grad_mask_c: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Return grads of ``(U, x, weight_c, bias, c0, mask_c)``; grad x is empty unless
    skip_mode == 1, grad mask_c unless need_grad_mask_c. grad_c_last None stands for zeros."""
    options = KernelOptions(hidden_size, num_directions(bidirectional), skip_mode,
                                   use_tanh, scale_x)
    return kernel_backward(require_library(), (grad_h, grad_c_last),
                           (U, x, weight_c, bias, c0, mask_c, mask_pad), c_all, options,
                           need_grad_mask_c)


@recurrence_bwd.register_fake
def _(grad_h, grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, c_all, hidden_size,
      bidirectional, skip_mode, use_tanh, scale_x, need_grad_mask_c):
    grad_x = U.new_empty(grad_h.shape if skip_mode == SKIP_SCALED_X else (0,))
    has_mask_grad = need_grad_mask_c and mask_c is not None
    grad_mask_c = U.new_empty(grad_h.shape[1:] if has_mask_grad else (0,))
    return (torch.empty_like(U), grad_x, torch.empty_like(weight_c), torch.empty_like(bias),
            U.new_empty(grad_h.shape[1:]), grad_mask_c)


def _setup_context(ctx, inputs, output):
    (U, x, weight_c, bias, c0, mask_c, mask_pad, hidden_size, bidirectional, skip_mode,
     use_tanh, scale_x, store_c) = inputs
    ctx.save_for_backward(U, x, weight_c, bias, c0, mask_c, mask_pad, output[2])
    # c_all is for our backward only; unused outputs get None instead of zero-filled tensors.
    ctx.mark_non_differentiable(output[2])
    ctx.set_materialize_grads(False)
    ctx.options = (hidden_size, bidirectional, skip_mode, use_tanh, scale_x, store_c)


def _backward(ctx, grad_h, grad_c_last, _grad_c_all):
    U, x, weight_c, bias, c0, mask_c, mask_pad, c_all = ctx.saved_tensors
    hidden_size, bidirectional, skip_mode, use_tanh, scale_x, store_c = ctx.options
    if not store_c:
        raise RuntimeError("sru::recurrence_fwd ran with store_c=False (no grad was expected), "
                           "so it kept no states to differentiate; call it with store_c=True")
    width = state_width(hidden_size, bidirectional)
    if grad_h is None:  # only c_last was used
        grad_h = U.new_zeros(U.shape[0], U.shape[1], width)
    if grad_c_last is not None:
        grad_c_last = grad_c_last.contiguous()
    need_grad_mask_c = mask_c is not None and ctx.needs_input_grad[5]
    grad_U, grad_x, grad_wc, grad_bias, grad_c0, grad_mask_c = recurrence_bwd(
        grad_h.contiguous(), grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, c_all,
        hidden_size, bidirectional, skip_mode, use_tanh, scale_x, need_grad_mask_c)
    return (grad_U, grad_x if skip_mode == SKIP_SCALED_X else None, grad_wc, grad_bias,
            None if c0 is None else grad_c0, grad_mask_c if need_grad_mask_c else None,
            None, None, None, None, None, None, None)


recurrence_fwd.register_autograd(_backward, setup_context=_setup_context)


def compute_dtype(U: Tensor) -> torch.dtype:
    """float64 stays float64; every other float dtype is computed in float32."""
    return torch.float64 if U.dtype == torch.float64 else torch.float32


def padded(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor,
           c0: Optional[Tensor], masks: Masks, spec: RecurrenceSpec) -> Tuple[Tensor, Tensor]:
    """The fused CPU recurrence; same arguments and results as ``reference.padded``."""
    dtype = compute_dtype(U)
    skip_mode, x = spec.skip_input(U, x)

    def prepare(t: Optional[Tensor]) -> Optional[Tensor]:
        return None if t is None else t.to(dtype).contiguous()

    tensors = (U, x, weight_c, bias, c0)
    # Keep every step's c only when a backward pass can follow (saves memory at inference).
    # Always under torch.jit.trace: the traced graph serves both modes, and the tracer's own
    # check re-runs it under no_grad, where a grad-dependent flag would make the graphs differ.
    store_c = needs_history(*tensors) or torch.jit.is_tracing()
    mask_pad = masks.mask_pad
    pad = None if mask_pad is None else mask_pad.ne(0).to(torch.uint8).contiguous()
    h, c_last, _ = recurrence_fwd(*(prepare(t) for t in tensors), prepare(masks.mask_c), pad,
                                  spec.hidden_size, spec.bidirectional, skip_mode, spec.use_tanh,
                                  float(spec.scale_x), store_c)
    return h.to(U.dtype), c_last.to(U.dtype)
