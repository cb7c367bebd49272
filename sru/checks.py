"""What ``sru.modules`` and ``sru.srupp`` check on every call (one ValueError naming expected vs
received, and the fix), and the empty outputs. Kept apart from the
modules so that the parameter/initialization code stays readable."""
import math
import numbers
from typing import Optional, Tuple

import torch
from torch import Tensor

from sru.ops.precision import recurrence_dtype, under_autocast


def shape_of(t: Tensor) -> tuple:
    return tuple(t.shape)


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_layer_sizes(owner: str, input_size, hidden_size, dropout, rnn_dropout) -> None:
    """A layer's constructor arguments (SRUCell, SRUppCell): positive int sizes, dropouts in [0, 1)."""
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not _is_int(value) or value <= 0:
            raise ValueError(f"{owner} expected {name} to be a positive int, got {value!r}")
    for name, value in (("dropout", dropout), ("rnn_dropout", rnn_dropout)):
        if not _is_number(value) or not 0.0 <= float(value) < 1.0:
            raise ValueError(f"{owner} expected {name} in [0, 1), got {value!r}")


def check_options(owner: str, flags: dict, counts: dict = None, numbers_: dict = None,
                  optional: tuple = (), at_least_0: tuple = ()) -> None:
    """The other constructor arguments, refused at construction rather than at the first
    forward (or never: a string is truthy): ``flags`` True/False (0/1 accepted as nn.LSTM
    does), ``counts`` ints >= 0, ``numbers_`` finite numbers (or None for the names in
    ``optional``, whose default is None; >= 0 for those in ``at_least_0``, e.g. a bound of an
    initialisation range)."""
    for name, value in flags.items():
        if not (isinstance(value, bool) or (_is_int(value) and value in (0, 1))):
            raise ValueError(f"{owner} expected {name} to be True or False, got {value!r}")
    for name, value in (counts or {}).items():
        if not _is_int(value) or value < 0:
            raise ValueError(f"{owner} expected {name} to be an int >= 0 (0 = none), got {value!r}")
    for name, value in (numbers_ or {}).items():
        if not (_is_number(value) or (value is None and name in optional)):
            raise ValueError(f"{owner} expected {name} to be a finite number, got {value!r}")
        if name in at_least_0 and value is not None and value < 0:
            raise ValueError(f"{owner} expected {name} to be a finite number >= 0, got {value!r}")


def check_module(owner: str, name: str, value, allow_list: bool = False) -> None:
    """``custom_m`` / ``transform_module``: None or an nn.Module (or, for SRU, one per layer)."""
    items = value if allow_list and isinstance(value, list) else [value]
    if value is not None and not all(isinstance(v, torch.nn.Module) for v in items):
        kinds = "an nn.Module or a list of them (one per layer)" if allow_list else "an nn.Module"
        raise ValueError(f"{owner} expected {name} to be None or {kinds}, got {type(value).__name__}")


def check_float_tensor(name: str, owner: str, t) -> None:
    if not isinstance(t, Tensor):
        raise ValueError(f"{owner} expected {name} to be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise ValueError(f"{owner} expected {name} to be a floating-point tensor, "
                         f"got dtype {t.dtype}; convert it with .float()")


def check_input_dtype(owner: str, input: Tensor, param_dtype: torch.dtype) -> None:
    """The input must be in the parameters' dtype (autocast casts for the matmuls itself)."""
    if input.dtype != param_dtype and not under_autocast(input.device.type):
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


def empty_outputs(input: Tensor, c0: Optional[Tensor], c_shape: Tuple[int, ...],
                  width: int, amp_recurrence_fp16: bool, module=None) -> Tuple[Tensor, Tensor]:
    """L = 0 or B = 0: h (L, B, width) in the input's dtype; c is c0 (no step changed it) or
    zeros, in the state dtype. Under autograd both stay attached to the input and ``module``'s
    parameters (as nn.LSTM's outputs are), so ``h.sum().backward()`` works and gives zero grads."""
    h = input.new_zeros(input.shape[0], input.shape[1], width)
    dtype = recurrence_dtype(input.dtype, amp_recurrence_fp16)
    c = input.new_zeros(c_shape, dtype=dtype) if c0 is None else c0.to(dtype).clone()
    sources = [input] + (list(module.parameters()) if module is not None else [])
    if torch.is_grad_enabled() and any(t.requires_grad for t in sources):
        anchor = sum(t.reshape(-1)[:0].sum().to(input.dtype) for t in sources)  # 0, but in the graph
        h, c = h + anchor, c + anchor.to(dtype)
    return h, c
