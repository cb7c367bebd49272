"""The fused CPU kernel over a packed batch (sru/ops/packing.py): the same C++ loops as the
padded path, with a row layout that skips absent rows (sru_recurrence.cpp), and its backward.
An autograd Function (not a custom op): the packed path is for eager training and inference."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..spec import SKIP_SCALED_X, Masks, RecurrenceSpec, needs_history
from .kernel import KernelOptions, backward as kernel_backward, forward as kernel_forward
from .autograd import require_library, compute_dtype


class _PackedRecurrenceCPU(torch.autograd.Function):
    """Inputs ``(U, x, weight_c, bias, c0, mask_c)``, then the layout and ``KernelOptions``."""

    @staticmethod
    def forward(ctx, U, x, weight_c, bias, c0, mask_c, layout, options: KernelOptions,
                store_c: bool):
        inputs = (U, x, weight_c, bias, c0, mask_c, None)
        h, c_last, c_all = kernel_forward(require_library(), inputs, options, store_c,
                                          layout.kernel_args)
        ctx.save_for_backward(U, x, weight_c, bias, c0, mask_c, c_all)
        ctx.layout, ctx.kernel_options = layout, options
        ctx.set_materialize_grads(False)
        return h, c_last

    @staticmethod
    def backward(ctx, grad_h, grad_c_last):
        U, x, weight_c, bias, c0, mask_c, c_all = ctx.saved_tensors
        layout, options = ctx.layout, ctx.kernel_options
        if grad_h is None:
            grad_h = U.new_zeros(layout.tokens, options.dirs * options.hidden_size)
        need_grad_mask_c = mask_c is not None and ctx.needs_input_grad[5]
        grads = (grad_h.contiguous(), None if grad_c_last is None else grad_c_last.contiguous())
        grad_U, grad_x, grad_wc, grad_bias, grad_c0, grad_mask_c = kernel_backward(
            require_library(), grads, (U, x, weight_c, bias, c0, mask_c, None), c_all, options,
            need_grad_mask_c, packing=layout.kernel_args)
        return (grad_U, grad_x if options.skip_mode == SKIP_SCALED_X else None, grad_wc,
                grad_bias, None if c0 is None else grad_c0,
                grad_mask_c if need_grad_mask_c else None, None, None, None)


def packed(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Optional[Tensor],
           masks: Masks, spec: RecurrenceSpec, layout) -> Tuple[Tensor, Tensor]:
    """``reference.packed`` on the fused kernel (inputs validated by sru/ops/packing.py)."""
    dtype = compute_dtype(U)
    skip_mode, x = spec.skip_input(U, x)
    tensors = [None if t is None else t.to(dtype).contiguous()
               for t in (U, x, weight_c, bias, c0, masks.mask_c)]
    h, c_last = _PackedRecurrenceCPU.apply(*tensors, layout,
                                           KernelOptions.of(spec, skip_mode),
                                           needs_history(U, x, weight_c, bias, c0, masks.mask_c))
    return h.to(U.dtype), c_last.to(U.dtype)
