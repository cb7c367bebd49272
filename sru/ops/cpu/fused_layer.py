"""A whole SRU layer on CPU (U = x W, then the fused recurrence) as one autograd function.

Why: when the skip input is the layer's own input (k = 3), x gets two gradients, one
through the matmul (grad_U W^T) and one through the skip term. As two separate autograd
nodes, autograd adds them in an extra pass over an (L, B, D) tensor. Here the kernel
writes the skip gradient first and the backward matmul accumulates onto it in place
(``addmm_``, beta = 1, the add happens inside the GEMM's output write), one memory pass
fewer per layer and per step. The backward also writes grad_U over U and the skip gradient
over the stored states (both internal to this function), so it allocates no new large
buffers: fresh pages from the OS cost a page fault and a zero-fill each.

Under bf16 autocast (``trainer.precision=bf16``) the three products run in bf16 on bf16 copies of x and
W (as autocast would cast them), U stays bf16 and the kernel reads it as such, running the recurrence in
float32 and writing grad U in bf16 for the two backward products (``sru.ops.precision.widened_in_kernel``):
the step is its bf16 GEMMs and one fused recurrence, no float32 copy of U or grad U between them. x's and
the parameters' gradients stay float32 (the skip gradient is float32; dX arrives in bf16 and is added).

Only for eager CPU training of the plain layer (``sru.forward_routes`` decides when); under
``torch.compile`` the modules keep using the ``sru::`` custom ops, which compile as one graph.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..precision import of_autocast, without_autocast
from ..spec import SKIP_SCALED_X, Masks, RecurrenceSpec
from .kernel import KernelOptions, backward as kernel_backward, forward as kernel_forward
from .autograd import require_library
from . import gemm as cpu_gemm


class _LinearRecurrence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, weight_c: Tensor, bias: Tensor,
                c0: Optional[Tensor], mask_c: Optional[Tensor], mask_pad: Optional[Tensor],
                options: KernelOptions,
                packing: Optional[Tuple[Tensor, Tensor]], gemm: str,
                products: Optional[torch.dtype]) -> Tuple[Tensor, Tensor]:
        with without_autocast("cpu"):  # the products' dtype is ``products``: x and W are cast here
            operands = _operands(x, weight, products)
            U = _matmul(*operands, gemm)
            h, c_last, c_all = kernel_forward(require_library(), (U, x, weight_c, bias, c0, mask_c, mask_pad),
                                              options, True, packing)
        ctx.save_for_backward(x, weight, weight_c, bias, c0, mask_c, mask_pad)
        # Plain attributes, not saved tensors: backward overwrites them (see there), which
        # autograd's version check on saved tensors would reject on a second backward.
        ctx.U, ctx.c_all, ctx.operands = U, c_all, None if products is None else operands
        ctx.kernel_options = options
        ctx.packing, ctx.gemm = packing, gemm
        ctx.states_overwritten = False  # set once a backward has reused U and c_all's memory
        ctx.set_materialize_grads(False)  # an unused output's grad stays None, not zeros
        return h, c_last

    @staticmethod
    def backward(ctx, grad_h: Optional[Tensor], grad_c_last: Optional[Tensor]):
        x, weight, weight_c, bias, c0, mask_c, mask_pad = ctx.saved_tensors
        U, c_all = ctx.U, ctx.c_all
        x_op, weight_op = (x, weight) if ctx.operands is None else ctx.operands  # the products' operands
        options, packing = ctx.kernel_options, ctx.packing
        if grad_h is None:  # only c_last was used
            grad_h = x.new_zeros(*x.shape[:-1], options.dirs * options.hidden_size)
        need_grad_mask_c = mask_c is not None and ctx.needs_input_grad[5]
        if ctx.states_overwritten:  # a second backward (retain_graph=True): recompute them
            U = _matmul(x_op, weight_op, ctx.gemm)
            c_all = kernel_forward(require_library(), (U, x, weight_c, bias, c0, mask_c, mask_pad),
                                   options, True, packing)[2]
        # U and c_all are ours alone (never returned) and this is their last use: the kernel
        # writes grad_U over U and the skip gradient over c_all (see kernel.backward).
        ctx.states_overwritten, ctx.U, ctx.c_all = True, None, None
        grads = (grad_h.contiguous(), None if grad_c_last is None else grad_c_last.contiguous())
        grad_U, grad_x, grad_wc, grad_bias, grad_c0, grad_mask_c = kernel_backward(
            require_library(), grads, (U, x, weight_c, bias, c0, mask_c, mask_pad), c_all, options,
            need_grad_mask_c, reuse=(U, c_all), packing=packing)
        rows = x.numel() // x.shape[-1]
        grad_U2 = grad_U.view(rows, -1)
        grad_weight = (cpu_gemm.product("dw", x_op.view(rows, -1), grad_U2, weight_op, ctx.gemm).to(weight.dtype)
                       if ctx.needs_input_grad[1] else None)
        if not ctx.needs_input_grad[0]:
            grad_x = None
        else:
            _add_grad_through_product(grad_x.view(rows, -1), grad_U2, weight_op, ctx.gemm)
        return (grad_x, grad_weight, grad_wc, grad_bias, None if c0 is None else grad_c0,
                grad_mask_c if need_grad_mask_c else None, None, None, None, None, None)


def _operands(x: Tensor, weight: Tensor, products: Optional[torch.dtype]) -> Tuple[Tensor, Tensor]:
    """x and W as the products read them: themselves, or copies in ``products`` (bf16 training)."""
    if products is None:
        return x, weight
    return x.to(products), weight.to(products)


def _add_grad_through_product(grad_x: Tensor, grad_U: Tensor, weight: Tensor, gemm: str) -> None:
    """grad_x (the skip gradient, rows x d_in) += grad_U Wᵀ, through the library the dispatch chose."""
    if cpu_gemm.dispatchable(grad_U, weight) and cpu_gemm.choose("dx", grad_U.shape[0], *weight.shape, gemm) == "onednn":
        grad_x.add_(cpu_gemm.product("dx", grad_U, weight, weight, "onednn"))
    elif grad_U.dtype == grad_x.dtype:  # added inside MKL's GEMM
        grad_x.addmm_(grad_U, weight.t())
    else:  # bf16 products: dX arrives in bf16, added to the float32 skip gradient
        grad_x.add_(grad_U.mm(weight.t()))


def _matmul(x: Tensor, weight: Tensor, gemm: str) -> Tensor:
    """U = x W over every token: x (L, B, d_in) or packed (N, d_in), through the CPU GEMM
    dispatch (sru/ops/cpu/gemm.py)."""
    return cpu_gemm.product("fwd", x.view(-1, x.shape[-1]), weight, weight, gemm).view(*x.shape[:-1], -1)


def linear_recurrence(x: Tensor, weight: Tensor, weight_c: Tensor, bias: Tensor,
                      c0: Optional[Tensor], masks: Masks, spec: RecurrenceSpec,
                      packing: Optional[Tuple[Tensor, Tensor]] = None, gemm: str = "auto") -> Tuple[Tensor, Tensor]:
    """``elementwise_recurrence(x @ weight, x, ...)`` with has_skip_term=True and k = 3,
    fused as described above. Expects what ``sru.modules`` checks before calling it: CPU
    tensors of one dtype (float32 or float64), x (L, B, d_in) with d_in == dirs*hidden_size,
    weight (d_in, 3*dirs*hidden_size), weight_c and bias (2*dirs*hidden_size,).
    ``packing``: ``(batch_sizes, step_offsets)`` when x is a packed (N, d_in) batch
    (``sru.ops.packing.PackedLayout.kernel_args``; then masks.mask_pad is None). ``gemm``: the
    CPU GEMM library of the three products (sru/ops/cpu/gemm.py). Under bf16 autocast the products run
    in bf16 (``Precision.autocast_dtype`` of ``of_autocast``), the recurrence in float32."""
    mask_pad = masks.mask_pad
    pad = None if mask_pad is None else mask_pad.ne(0).to(torch.uint8).contiguous()
    contiguous = (lambda t: None if t is None else t.contiguous())
    return _LinearRecurrence.apply(x.contiguous(), weight.contiguous(), weight_c.contiguous(),
                                   bias.contiguous(), contiguous(c0), contiguous(masks.mask_c),
                                   pad, KernelOptions.of(spec, SKIP_SCALED_X), packing, gemm,
                                   of_autocast("cpu").autocast_dtype)
