"""Inference of a whole SRU stack on CPU without autograd: each layer's matmul, then one direct
call of the fused forward kernel.

Why: with no gradient to record, the general path's per-layer machinery (argument checks,
the ``torch.library`` custom-op wrapper, ctypes struct construction, per-layer ``c`` slicing
and the final ``torch.stack``) costs enough Python per layer that, at one decoding step
(L = 1) is more than the layer's matmul itself. Here one ``SruArgs`` struct is filled in place
per layer (a few pointer and integer stores), every layer writes its last state straight into
its slot of the returned (layers, B, dirs*d) tensor, and nothing else is allocated but U and h.
The same kernel computes the same numbers as the general path (bit for bit: same matmul, same
loop), for any L, so short sequences (small shapes) gain too.

``sru.modules`` decides when this applies (inference, plain weights, float32/float64, no
dropout masks) and validates shapes before calling.
"""
import ctypes
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .routes import matmul
from .kernel import SruArgs, skip_mode_of

_ENTRY = {torch.float32: "sru_forward_f32", torch.float64: "sru_forward_f64"}


def kernel_cell(cell, dtype: torch.dtype) -> bool:
    """Whether one SRUCell can run on the fused kernel without autograd in ``dtype``: its own
    weight (no ``custom_m``), the CPU backend, no dropout mask to draw, weight / weight_c / bias in
    ``dtype`` with weight_c and bias contiguous. The common part of ``sru.ops.cpu.paths.inference_plan``
    and of the stack path's ``sru.ops.cpu.stack`` eligibility. Reads ``_parameters`` directly
    (``nn.Module.__getattr__`` costs about a microsecond an access)."""
    params = cell._parameters
    weight, weight_c, bias = params.get("weight"), params["weight_c"], params["bias"]
    return not (weight is None or cell.backend not in ("auto", "cpu")
                or cell.__dict__.get("custom_m") is not None or cell._modules.get("custom_m") is not None
                or (cell.training and (cell.dropout > 0 or cell.rnn_dropout > 0))
                or weight.dtype != dtype or weight_c.dtype != dtype or bias.dtype != dtype
                or not (weight_c.is_contiguous() and bias.is_contiguous()))


def recurrence_args(cell) -> tuple:
    """``(weight_c, bias, hidden_size, dirs, k, skip_mode, use_tanh, scale_x)``: what the kernel reads of a
    layer (an SRUCell or an SRUppCell): ``layer_args``' recurrence part, SRU++ decoding's direct calls
    (``recurrence``) and its fused step's layers (sru/ops/cpu/srupp_step.py)."""
    params = cell._parameters
    return (params["weight_c"], params["bias"], cell.hidden_size, cell.num_directions, cell.num_matrices,
            skip_mode_of(cell), cell.activation_type, cell.skip_scale)


def layer_args(cell) -> tuple:
    """One layer's entry of ``forward_stack``'s plan (see there), read once from a kernel cell."""
    params = cell._parameters
    weight_c, bias, hidden, dirs, k, skip_mode, use_tanh, scale_x = recurrence_args(cell)
    return (params["weight"], weight_c, bias, params.get("weight_proj"),
            cell._modules.get("layer_norm"), cell.normalize_after, hidden, dirs,
            k, skip_mode, use_tanh, scale_x,
            cell.gemm, cell._modules.get("weight_proj_int8"), cell._modules.get("weight_int8"), cell.own_precision)


def _set_recurrence(args: SruArgs, weight_c: Tensor, bias: Tensor, hidden: int, dirs: int, k: int,
                    skip_mode: int, use_tanh, scale_x: float) -> None:
    """A layer's fields of ``args`` (``recurrence_args``' order)."""
    args.weight_c, args.bias = weight_c.data_ptr(), bias.data_ptr()
    args.hidden, args.dirs, args.k, args.skip_mode = hidden, dirs, k, skip_mode
    args.use_tanh, args.scale_x = use_tanh, scale_x


def _call(lib: ctypes.CDLL, args: SruArgs, dtype: torch.dtype) -> None:
    if getattr(lib, _ENTRY[dtype])(ctypes.byref(args)) != 0:  # unreachable for a valid cell
        raise RuntimeError(f"sru CPU kernel: unsupported k={args.k} with skip_mode={args.skip_mode}")


def recurrence(lib: ctypes.CDLL, layer: tuple, U: Tensor, residual: Tensor, c0: Tensor) -> Tuple[Tensor, Tensor]:
    """One layer's recurrence as one kernel call: ``layer`` = ``recurrence_args(cell)``; U (L, B, dirs*d*k),
    residual (L, B, dirs*d) (the skip input, read when skip_mode is 1) and c0 (B, dirs*d) contiguous, in the
    layer's dtype. Returns h (L, B, dirs*d) and the last c (B, dirs*d)."""
    length, batch = U.shape[0], U.shape[1]
    width = layer[2] * layer[3]
    h, c_last = U.new_empty(length, batch, width), U.new_empty(batch, width)
    args = SruArgs(length=length, batch=batch, num_threads=torch.get_num_threads(), U=U.data_ptr(),
                   h=h.data_ptr(), c_last=c_last.data_ptr(), c0=c0.data_ptr(),
                   x=residual.data_ptr() if layer[5] == 1 else None)
    _set_recurrence(args, *layer)
    _call(lib, args, U.dtype)
    return h, c_last


def forward_stack(lib: ctypes.CDLL, x: Tensor, plan: Sequence[tuple], c0: Optional[Tensor],
                  mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """Run the layers of ``plan`` on x (L, B, d_in), in order.

    plan: per layer ``(weight, weight_c, bias, weight_proj, layer_norm, normalize_after,
    hidden_size, dirs, k, skip_mode, use_tanh, scale_x, gemm, proj_int8, int8, precision)``
    (``sru.ops.cpu.paths.inference_plan``),
    tensors in x's dtype; x contiguous; c0 None or contiguous (layers, B, dirs*d); mask_pad
    None or a contiguous uint8 (L, B). Returns h (L, B, dirs*d) and the last c of every layer
    (layers, B, dirs*d). Layer norm (pre or post) runs as a plain torch op.
    """
    length, batch = x.shape[0], x.shape[1]
    rows = length * batch
    width = plan[-1][7] * plan[-1][6]  # every layer of a stack has the same output width
    c_out = x.new_empty(len(plan), batch, width)
    step = batch * width * x.element_size()  # bytes between two layers' states
    args = SruArgs()
    args.length, args.batch, args.num_threads = length, batch, torch.get_num_threads()
    args.mask_pad = None if mask_pad is None else mask_pad.data_ptr()
    c0_ptr = None if c0 is None else c0.data_ptr()
    c_ptr = c_out.data_ptr()
    h = x.view(rows, x.shape[2])
    for i, (weight, weight_c, bias, proj, norm, normalize_after, hidden, dirs, k, skip_mode,
            use_tanh, scale_x, gemm, proj_int8, int8, precision) in enumerate(plan):
        residual = h  # the skip term sees the raw input (before layer norm)
        if norm is not None and not normalize_after:
            h = F.layer_norm(h, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
        if proj is not None:
            h = matmul(h, proj, gemm, False, proj_int8, precision)
        U = matmul(h, weight, gemm, False, int8, precision)  # the projection's route (sru/ops/cpu/routes.py)
        out = x.new_empty(rows, width)
        args.U, args.h, args.c_last = U.data_ptr(), out.data_ptr(), c_ptr + i * step
        args.x = residual.data_ptr() if skip_mode == 1 else None
        args.c0 = None if c0_ptr is None else c0_ptr + i * step
        _set_recurrence(args, weight_c, bias, hidden, dirs, k, skip_mode, use_tanh, scale_x)
        _call(lib, args, x.dtype)
        h = out
        if norm is not None and normalize_after:
            h = F.layer_norm(h, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
    return h.view(length, batch, width), c_out
