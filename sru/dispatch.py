"""What ``sru.modules`` checks on every call and which execution path it takes.

Kept apart from the modules so that the parameter/initialization code stays readable. Four
paths exist (see docs/ops.md):

- the *stack path* (``sru.ops.cpu.stack``): the inference path of a plain stack (no layer norm,
  projection or input_to_hidden) as one C call, tried first by ``SRU.forward``;
- the *inference path* (``sru.ops.cpu.inference``): no autograd, CPU, float32/float64, no
  dropout masks: each layer's matmul plus one direct kernel call, for the whole stack;
- the *fused training path* (``sru.ops.fused_layer``): eager CPU training of a plain k = 3 layer;
- the general path: U from the weight (or ``custom_m``), then ``sru.ops.elementwise_recurrence``
  (any backend, autograd, torch.compile, autocast, half precision).
"""
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from sru.ops import _cpu_kernel_available
from sru.ops.cpu.build import load_library
from sru.ops.cpu.inference import forward_stack, kernel_cell, skip_mode
from sru.ops.cpu.stack import StackPlan

LOW_PRECISION = (torch.float16, torch.bfloat16)
_KERNEL_DTYPES = (torch.float32, torch.float64)


def shape_of(t: Tensor) -> tuple:
    return tuple(t.shape)


def check_layer_sizes(owner: str, input_size, hidden_size, dropout, rnn_dropout) -> None:
    """A layer's constructor arguments (SRUCell, SRUppCell): positive int sizes, dropouts in [0, 1)."""
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{owner} expected {name} to be a positive int, got {value!r}")
    for name, value in (("dropout", dropout), ("rnn_dropout", rnn_dropout)):
        if not 0.0 <= float(value) < 1.0:
            raise ValueError(f"{owner} expected {name} in [0, 1), got {value!r}")


def check_float_tensor(name: str, owner: str, t) -> None:
    if not isinstance(t, Tensor):
        raise ValueError(f"{owner} expected {name} to be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise ValueError(f"{owner} expected {name} to be a floating-point tensor, "
                         f"got dtype {t.dtype}; convert it with .float()")


def check_input_dtype(owner: str, input: Tensor, param_dtype: torch.dtype) -> None:
    """The input must be in the parameters' dtype (autocast casts for the matmuls itself)."""
    if input.dtype != param_dtype and not torch.is_autocast_enabled(input.device.type):
        raise ValueError(f"{owner} expected input of dtype {param_dtype} (the parameters' "
                         f"dtype), got {input.dtype}; convert the input or the module "
                         f"(e.g. module.to({input.dtype}))")


def check_mask_pad(owner: str, mask_pad: Tensor, expected: tuple, layout: str) -> None:
    if not isinstance(mask_pad, Tensor) or shape_of(mask_pad) != expected:
        got = shape_of(mask_pad) if isinstance(mask_pad, Tensor) else type(mask_pad).__name__
        raise ValueError(f"{owner} expected mask_pad of shape {layout} = {expected} "
                         f"(nonzero/True = padded step), got {got}")


def check_cell_input(cell, input: Tensor, c0: Optional[Tensor],
                     mask_pad: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor], bool]:
    """``SRUCell.forward``'s argument checks (one ValueError naming expected vs received); returns
    input as (L, B, d), mask_pad as (L, B), and whether the input was a single (B, d) step."""
    check_float_tensor("input", "SRUCell", input)
    if input.dim() not in (2, 3) or input.size(-1) != cell.input_size:
        raise ValueError(f"SRUCell expected input of shape (length, batch, {cell.input_size}) "
                         f"or (batch, {cell.input_size}), got {shape_of(input)}")
    if cell.weight is not None:
        check_input_dtype("SRUCell", input, cell.weight.dtype)
    single_step = input.dim() == 2
    if single_step:
        input = input.unsqueeze(0)
        if mask_pad is not None and isinstance(mask_pad, Tensor) and mask_pad.dim() == 1:
            mask_pad = mask_pad.unsqueeze(0)
    length, batch = input.size(0), input.size(1)
    if c0 is not None:  # None means zeros; the recurrence allocates nothing for it
        check_float_tensor("c0", "SRUCell", c0)
        if shape_of(c0) != (batch, cell.output_size):
            raise ValueError(f"SRUCell expected c0 of shape (batch, directions*hidden_size) = "
                             f"{(batch, cell.output_size)}, got {shape_of(c0)}")
    if mask_pad is not None:
        check_mask_pad("SRUCell", mask_pad, (length, batch), "(length, batch)")
    return input, mask_pad, single_step


def check_stack_input(sru, input: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor],
                      time_major: bool) -> Tuple[Tensor, Optional[Tensor]]:
    """``SRU.forward``'s argument checks (one ValueError naming expected vs received); returns
    input and mask_pad time-major."""
    check_float_tensor("input", "SRU", input)
    dims = "length, batch" if time_major else "batch, length"
    if input.dim() != 3 or input.size(-1) != sru.input_size:
        raise ValueError(f"SRU expected input of shape ({dims}, {sru.input_size}), "
                         f"got {shape_of(input)}")
    if mask_pad is not None:
        check_mask_pad("SRU", mask_pad, shape_of(input)[:2], f"({dims})")
    if not time_major:
        input = input.transpose(0, 1)
        mask_pad = None if mask_pad is None else mask_pad.transpose(0, 1)
    if c0 is not None:
        check_float_tensor("c0", "SRU", c0)
        expected = (sru.num_layers, input.size(1), sru.output_size)
        if shape_of(c0) != expected:
            raise ValueError(f"SRU expected c0 of shape (num_layers, batch, "
                             f"directions*hidden_size) = {expected}, got {shape_of(c0)}")
    return input, mask_pad


def state_dtype(dtype: torch.dtype, amp_recurrence_fp16: bool = False) -> torch.dtype:
    """The dtype the recurrence runs and keeps c in: float32 for half-precision inputs (c is
    accumulated over time), float16 only when ``amp_recurrence_fp16`` asks for it."""
    if dtype in LOW_PRECISION:
        return torch.float16 if amp_recurrence_fp16 and dtype == torch.float16 else torch.float32
    return dtype


def empty_outputs(input: Tensor, c0: Optional[Tensor], c_shape: Tuple[int, ...],
                  width: int, amp_recurrence_fp16: bool, module=None) -> Tuple[Tensor, Tensor]:
    """L = 0 or B = 0: h (L, B, width) in the input's dtype; c is c0 (no step changed it) or
    zeros, in the state dtype. Under autograd both stay attached to the input and ``module``'s
    parameters (as nn.LSTM's outputs are), so ``h.sum().backward()`` works and gives zero grads."""
    h = input.new_zeros(input.shape[0], input.shape[1], width)
    dtype = state_dtype(input.dtype, amp_recurrence_fp16)
    c = input.new_zeros(c_shape, dtype=dtype) if c0 is None else c0.to(dtype).clone()
    sources = [input] + (list(module.parameters()) if module is not None else [])
    if torch.is_grad_enabled() and any(t.requires_grad for t in sources):
        anchor = sum(t.reshape(-1)[:0].sum().to(input.dtype) for t in sources)  # 0, but in the graph
        h, c = h + anchor, c + anchor.to(dtype)
    return h, c


def _eager_cpu(input: Tensor) -> bool:
    """Plain eager CPU execution: no tracing subclass, autocast, compile or functorch."""
    return (type(input) is Tensor and input.is_cpu
            and not torch.is_autocast_enabled("cpu")
            and not torch.compiler.is_compiling()
            and not torch._C._are_functorch_transforms_active())  # torch.func.grad, vmap


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
    if torch.is_grad_enabled() or dtype not in _KERNEL_DTYPES or not _eager_cpu(input):
        return None
    plan = []
    for cell in cells:
        params, norm = cell._parameters, cell._modules.get("layer_norm")
        proj = params.get("weight_proj")
        if (not kernel_cell(cell, dtype)
                or (proj is not None and proj.dtype != dtype)
                or (norm is not None and norm.weight is not None and norm.weight.dtype != dtype)):
            return None
        plan.append((params["weight"], params["weight_c"], params["bias"], proj, norm,
                     cell.normalize_after, cell.hidden_size, cell.num_directions,
                     cell.num_matrices, skip_mode(cell), cell.activation_type, cell._skip_scale))
    return plan if _cpu_kernel_available() else None


def run_inference_path(plan: List[tuple], input: Tensor, c0: Optional[Tensor],
                       mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """``forward_stack`` after making its inputs contiguous, in one dtype (shapes checked by
    the caller). c0 (layers, B, dirs*d) or None."""
    if c0 is not None and not (c0.dtype == input.dtype and c0.is_contiguous()):
        c0 = c0.to(input.dtype).contiguous()
    pad = None if mask_pad is None else mask_pad.ne(0).to(torch.uint8).contiguous()
    return forward_stack(load_library(), input.contiguous(), plan, c0, pad)


def fuse_layer(cell, input: Tensor, residual: Tensor, c0: Optional[Tensor]) -> bool:
    """Whether the matmul and the recurrence can run as one CPU autograd function
    (``sru.ops.fused_layer``: the skip gradient is added inside the backward GEMM).

    Only when training in eager mode (under torch.compile the custom ops make one graph),
    with the plain weight (no projection, no custom_m), k = 3 and the skip input being
    the matmul's own input (no pre-layer-norm, no rnn_dropout), one float dtype, no autocast.
    """
    return (input is residual and _eager_cpu(input)
            and cell.num_matrices == 3 and cell.has_skip_term
            and cell.custom_m is None and cell.weight_proj is None
            and cell.backend in ("auto", "cpu")
            and torch.is_grad_enabled() and input.dtype in _KERNEL_DTYPES
            and input.dtype == cell.weight.dtype == cell.weight_c.dtype == cell.bias.dtype
            and (c0 is None or c0.dtype == input.dtype)
            and _cpu_kernel_available())


def stack_inference(sru, input, c0, mask_pad) -> Optional[Tuple[Tensor, Tensor]]:
    """``SRU.forward``'s result through the stack path (``sru.ops.cpu.stack``), or None when that
    path does not apply (then the general code runs and raises any argument error itself).

    Every check here is a cheap flag or shape test: at one decoding step this function and the
    C call are all the Python there is. The plan is cached in the module's ``__dict__`` (left
    out of pickles by ``SRU.__getstate__``) and rebuilt when ``StackPlan.current`` says so.
    """
    if (torch.is_grad_enabled() or type(input) is not Tensor or input.dim() != 3
            or input.dtype not in _KERNEL_DTYPES or input.shape[2] != sru.input_size
            or sru.nn_rnn_compatible_return or sru._modules.get("input_to_hidden") is not None
            or not _eager_cpu(input)):
        return None
    x = input.transpose(0, 1) if sru.batch_first else input
    length, batch = x.shape[0], x.shape[1]
    if length == 0 or batch == 0:
        return None
    if c0 is not None and (type(c0) is not Tensor or c0.dtype != x.dtype or not c0.is_contiguous()
                           or c0.shape != (sru.num_layers, batch, sru.output_size)):
        return None
    if mask_pad is not None:
        if type(mask_pad) is not Tensor or mask_pad.shape != input.shape[:2]:
            return None
        mask_pad = mask_pad.transpose(0, 1) if sru.batch_first else mask_pad
        mask_pad = mask_pad.ne(0).to(torch.uint8).contiguous()
    plan = sru.__dict__.get("_stack_plan")
    if plan is None or not plan.current(x.dtype):
        lib = load_library()
        if lib is None:
            return None
        plan = sru.__dict__["_stack_plan"] = StackPlan(lib, list(sru.rnn_lst._modules.values()), x.dtype)
    if not plan.usable:
        return None
    out = plan.run(x.contiguous(), c0, mask_pad)
    if out is None or not sru.batch_first:
        return out
    return out[0].transpose(0, 1), out[1]
