"""The Triton kernels over a packed batch (sru/ops/packing.py): the same forward and backward
kernels as sru/ops/triton/padded.py, launched with ``PACKED=True``.

Each program still owns columns of the flattened (B, dirs*d) state; at step t a column of
sequence b reads row ``step_offsets[t] + b`` of the packed tensors when ``b < batch_sizes[t]``
and does nothing otherwise (its state stays), so no padded step is loaded, computed or stored.
An autograd Function (not a custom op): the packed path is for eager training and inference.
"""
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from ..spec import Masks, RecurrenceSpec, needs_history
from .kernels import SKIP_X, compiled_kernels
from .launch import launch
from .padded import (compute_dtype, launch_config, on_device, scale_args, check_device,
                     kernel_scale)


class _Options(NamedTuple):
    """What the packed launches need besides tensors."""

    scale_value: float
    layout: object  # sru.ops.packing.PackedLayout
    hidden_size: int
    skip: int
    tanh: bool


def _forward(tensors, scale_t, options: _Options, store_history: bool):
    U, x, weight_c, bias, c0, mask_c = tensors
    scale_value, layout, hidden_size, skip, tanh = options
    forward_kernel, _ = compiled_kernels()
    batch, dd = c0.shape
    h = U.new_empty(layout.tokens, dd)
    c_all = torch.empty(layout.tokens if store_history else 0, dd, dtype=compute_dtype(U),
                        device=U.device)
    c_last = U.new_empty(batch, dd)
    batch_sizes, offsets = layout.on(U.device)
    block, num_warps, grid = launch_config(batch * dd)
    scale_ptr, scale_from_ptr = scale_args(scale_t, U)
    with on_device(U):
        launch(forward_kernel, (grid,), "forward", U.device, (
            U, U if x is None else x, weight_c, bias, c0, U if mask_c is None else mask_c, U,
            scale_ptr, h, c_all, c_last, layout.length, batch, hidden_size, dd, scale_value), dict(
            K=U.shape[1] // dd, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
            HAS_MASK_PAD=False, PER_STEP_W=False, SCALE_FROM_PTR=scale_from_ptr,
            STORE_C=store_history, FP64=U.dtype == torch.float64, BLOCK=block,
            BATCH_SIZES=batch_sizes, STEP_OFFSETS=offsets, PACKED=True, num_warps=num_warps),
            layer=f"hidden_size={hidden_size}, directions={dd // hidden_size}")
    return h, c_last, c_all


class _PackedTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, U, x, weight_c, bias, c0, mask_c, scale_t, options: _Options,
                store_history: bool):
        h, c_last, c_all = _forward((U, x, weight_c, bias, c0, mask_c), scale_t, options,
                                    store_history)
        ctx.save_for_backward(U, x, weight_c, bias, c0, mask_c, scale_t, c_all)
        ctx.options = options
        ctx.set_materialize_grads(False)
        return h, c_last

    @staticmethod
    def backward(ctx, grad_h, grad_c_last):
        U, x, weight_c, bias, c0, mask_c, scale_t, c_all = ctx.saved_tensors
        scale_value, layout, hidden_size, skip, tanh = ctx.options
        _, backward_kernel = compiled_kernels()
        batch, dd = c0.shape
        acc = compute_dtype(U)
        grad_h = U.new_zeros(layout.tokens, dd) if grad_h is None else grad_h.contiguous()
        grad_c_last = torch.zeros_like(c0) if grad_c_last is None else grad_c_last.contiguous()
        need_grad_mask_c = mask_c is not None and ctx.needs_input_grad[5]
        grad_U = torch.empty_like(U)
        grad_x = torch.empty_like(x) if skip == SKIP_X else None
        grad_c0 = torch.empty_like(c0)
        grad_mask_c = torch.empty_like(mask_c) if need_grad_mask_c else None
        part_w = torch.empty(batch, 2 * dd, dtype=acc, device=U.device)
        part_b = torch.empty(batch, 2 * dd, dtype=acc, device=U.device)
        batch_sizes, offsets = layout.on(U.device)
        block, num_warps, grid = launch_config(batch * dd)
        scale_ptr, scale_from_ptr = scale_args(scale_t, U)
        with on_device(U):
            launch(backward_kernel, (grid,), "backward", U.device, (
                grad_h, grad_c_last, U, U if x is None else x, weight_c, bias, c0,
                U if mask_c is None else mask_c, U, scale_ptr, c_all, grad_U,
                U if grad_x is None else grad_x, U, grad_c0,
                U if grad_mask_c is None else grad_mask_c, part_w, part_b,
                layout.length, batch, hidden_size, dd, scale_value), dict(
                K=U.shape[1] // dd, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
                HAS_MASK_PAD=False, PER_STEP_W=False, SCALE_FROM_PTR=scale_from_ptr,
                NEED_GRAD_MASK_C=need_grad_mask_c, FP64=U.dtype == torch.float64, BLOCK=block,
                BATCH_SIZES=batch_sizes, STEP_OFFSETS=offsets, PACKED=True, num_warps=num_warps),
                layer=f"hidden_size={hidden_size}, directions={dd // hidden_size}")
        # Deterministic reduction of the per-(batch, column) partial sums, as sru/ops/triton/padded.py.
        return (grad_U, grad_x, part_w.sum(0).to(weight_c.dtype), part_b.sum(0).to(bias.dtype),
                grad_c0, grad_mask_c, None, None, None)


def packed(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Optional[Tensor],
           masks: Masks, spec: RecurrenceSpec, layout) -> Tuple[Tensor, Tensor]:
    """``reference.packed`` on the Triton kernels (arguments validated by sru/ops/packing.py):
    h (N, dirs*d) in U's dtype, c_last (B, dirs*d); arithmetic in fp32 (fp64 for fp64 U)."""
    mask_c = masks.mask_c
    check_device(U)
    skip, x = spec.skip_input(U, x)
    x = None if x is None else x.contiguous()
    if c0 is None:
        c0 = U.new_zeros(layout.batch, spec.width)
    scale_t, scale_value = kernel_scale(spec.scale_x, U)
    store_history = needs_history(U, x, weight_c, bias, c0, mask_c)
    contig = (lambda t: None if t is None else t.contiguous())
    options = _Options(scale_value, layout, spec.hidden_size, skip, spec.use_tanh)
    return _PackedTriton.apply(U.contiguous(), x, weight_c.contiguous(), bias.contiguous(),
                               c0.contiguous(), contig(mask_c), scale_t, options, store_history)
