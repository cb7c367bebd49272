"""The CPU backend's guards and runners of three forward routes; which route runs is chosen in one place,
``sru.forward_routes.choose_route`` (the table: docs/ops.md#forward-routes):

- the *stack path* (``sru.ops.cpu.stack``): the inference path of a plain stack (no layer norm,
  projection or input_to_hidden) as one C call (``stack_plan``, then ``run_stack``);
- the *inference path* (``sru.ops.cpu.inference``): no autograd, CPU, float32/float64, no
  dropout masks: each layer's matmul plus one direct kernel call, for the whole stack;
- the *fused training path* (``sru.ops.cpu.fused_layer``): eager CPU training of a plain k = 3
  layer;
- (the general path, U then ``sru.ops.elementwise_recurrence``, needs nothing from here.)

These functions are the CPU backend's whole-layer and whole-stack entry points (``paths`` of its entry
in sru/ops/backends.py): the layer reaches them through that table, never by importing this module.
"""
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..precision import of_autocast, under_autocast
from ..tracing import eager_cpu
from .build import cpu_kernel_available, load_library
from .fused_layer import linear_recurrence
from .inference import forward_stack, kernel_cell, layer_args
from .stack import StackPlan

__all__ = ["fuse_layer", "inference_plan", "linear_recurrence", "run_inference_path", "run_stack", "stack_plan"]

_KERNEL_DTYPES = (torch.float32, torch.float64)


def _eager_cpu(input: Tensor) -> bool:
    """The one eager-CPU guard (``sru.ops.tracing.eager_cpu``: under ``torch.jit.trace`` the direct kernel
    calls would record only the empty outputs), outside autocast."""
    return not under_autocast("cpu") and eager_cpu(input)


def _autocast_inference(input: Tensor) -> bool:
    """float32 CPU inference under autocast: the inference path runs with U from the route the autocast's
    precision picks (sru/ops/cpu/routes.py: float32 U in inference) and the recurrence in fp32, as the
    general path would."""
    return input.dtype is torch.float32 and eager_cpu(input)


def inference_plan(cells: Sequence, input: Tensor) -> Optional[List[tuple]]:
    """The per-layer arguments of ``sru.ops.cpu.inference.forward_stack`` when ``cells`` can
    run on ``input`` that way, else None: no autograd (no_grad / inference_mode), eager CPU,
    the cells' own float32/float64 dtype, plain weights (a projection is fine, ``custom_m``
    is not), the CPU backend, no dropout masks to draw.

    Called on every inference forward, so it reads parameters from ``_parameters`` directly
    (``nn.Module.__getattr__`` costs about a microsecond per access: a decoding step has a
    budget of a few) and checks and gathers in one pass.
    """
    dtype = input.dtype
    if torch.is_grad_enabled() or dtype not in _KERNEL_DTYPES or not (_eager_cpu(input) or _autocast_inference(input)):
        return None
    plan = []
    for cell in cells:
        params, norm = cell._parameters, cell._modules.get("layer_norm")
        proj = params.get("weight_proj")
        if (not kernel_cell(cell, dtype)
                or (proj is not None and proj.dtype != dtype)
                or (norm is not None and norm.weight is not None and norm.weight.dtype != dtype)):
            return None
        plan.append(layer_args(cell))
    return plan if cpu_kernel_available() else None


def run_inference_path(plan: List[tuple], input: Tensor, c0: Optional[Tensor],
                       mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """``forward_stack`` after making its inputs contiguous, in one dtype (shapes checked by
    the caller). c0 (layers, B, dirs*d) or None."""
    if c0 is not None and not (c0.dtype == input.dtype and c0.is_contiguous()):
        c0 = c0.to(input.dtype).contiguous()
    pad = None if mask_pad is None else mask_pad.ne(0).to(torch.uint8).contiguous()
    return forward_stack(load_library(), input.contiguous(), plan, c0, pad)


def fuse_layer(cell, input: Tensor, c0: Optional[Tensor]) -> bool:
    """Whether the layer's matmul and recurrence can run as one CPU autograd function
    (``sru.ops.cpu.fused_layer``: the skip gradient is added inside the backward GEMM).

    Only when training in eager mode (under torch.compile the custom ops make one graph),
    with the plain weight (no projection, no custom_m), k = 3 and the skip input being
    the matmul's own input (no pre-layer-norm, no rnn_dropout mask to draw), one float dtype, no autocast or
    bf16 autocast over a float32 layer (``Precision.fuses_cpu_training``: bf16 products, float32 recurrence), and
    no precision of the layer's own (``sru.to_precision``: its projections take the bf16 route).
    """
    return (eager_cpu(input) and torch.is_grad_enabled() and of_autocast("cpu").fuses_cpu_training(input.dtype)
            and cell.num_matrices == 3 and cell.has_skip_term
            and cell.custom_m is None and cell.weight_proj is None and cell.own_precision is None
            and (cell.layer_norm is None or cell.normalize_after)
            and not (cell.training and cell.rnn_dropout > 0)
            and cell.backend in ("auto", "cpu")
            and input.dtype == cell.weight.dtype == cell.weight_c.dtype == cell.bias.dtype
            and (c0 is None or c0.dtype == input.dtype)
            and cpu_kernel_available())


def stack_plan(sru, input, c0, mask_pad) -> Optional[StackPlan]:
    """The plan that runs ``SRU.forward`` as one C call (``sru.ops.cpu.stack``), or None when that path
    does not apply (then another route runs and raises any argument error itself).

    Every check here is a cheap flag or shape test: at one decoding step this function, ``run_stack`` and
    the C call are all the Python there is. The plan is cached in the module's ``__dict__`` (left out of
    pickles by ``SRU.__getstate__``) and rebuilt when ``StackPlan.current`` says so: it compares a key read
    from the cells (``sru.ops.cpu.stack.plan_key``), so no global state.
    """
    if (torch.is_grad_enabled() or type(input) is not Tensor or input.dim() != 3
            or input.dtype not in _KERNEL_DTYPES or input.shape[2] != sru.input_size
            or sru.nn_rnn_compatible_return or sru._modules.get("input_to_hidden") is not None
            or not _eager_cpu(input)):
        return None
    length, batch = (input.shape[1], input.shape[0]) if sru.batch_first else (input.shape[0], input.shape[1])
    if length == 0 or batch == 0:
        return None
    if c0 is not None and (type(c0) is not Tensor or c0.dtype != input.dtype or not c0.is_contiguous()
                           or c0.shape != (sru.num_layers, batch, sru.output_size)):
        return None
    if mask_pad is not None and (type(mask_pad) is not Tensor or mask_pad.shape != input.shape[:2]):
        return None
    plan, cells = sru.__dict__.get("_stack_plan"), list(sru.rnn_lst._modules.values())
    if plan is None or not plan.current(cells, input.dtype):
        lib = load_library()
        if lib is None:
            return None
        plan = StackPlan(lib, cells, input.dtype)
        sru._stack_plan = plan
    if not plan.usable:
        return None
    return plan


def run_stack(sru, plan: StackPlan, input: Tensor, c0: Optional[Tensor],
              mask_pad: Optional[Tensor]) -> Optional[Tuple[Tensor, Tensor]]:
    """``SRU.forward``'s result through ``plan`` (from ``stack_plan`` on the same arguments), or None when this
    torch turned out to have no BLAS symbol to call (the plan is then unusable: choose again)."""
    x = input.transpose(0, 1) if sru.batch_first else input
    if mask_pad is not None:
        mask_pad = mask_pad.transpose(0, 1) if sru.batch_first else mask_pad
        mask_pad = mask_pad.ne(0).to(torch.uint8).contiguous()
    out = plan.run(x.contiguous(), c0, mask_pad)  # a layer routed to oneDNN: the plan's per-layer calls
    if out is None or not sru.batch_first:
        return out
    return out[0].transpose(0, 1), out[1]
