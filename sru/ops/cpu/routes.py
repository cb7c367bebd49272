"""The projection entry point: ``matmul`` (the layer's U = x W) and ``linear`` (``F.linear``) choose their route
from ``ROUTES``, one table of (name, when it applies, what runs). Each route's ``applies`` is its one guard (every
fast route shares ``sru.ops.tracing.eager_cpu``) and its one rule for when it pays; the first route that applies
runs. docs/ops.md#precision-routes-sruopscpuroutespy lists them.

The precision reaches this entry point as arguments: ``precision`` (a ``sru.Precision``: the layer's own, set
by ``sru.to_precision``; None: what CPU autocast says, the way training's ``trainer.precision=bf16`` enters) and
``int8`` (the weight's ``sru.ops.quantized.Int8Weight``, which makes the product int8 wherever int8 pays).
``library`` names the fp32 GEMM library only (auto / mkl / onednn).
"""
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ..precision import Precision, of_autocast, under_autocast
from ..tracing import eager_cpu
from . import gemm
from .int8 import per_token_product, takes_int8


class Call(NamedTuple):
    """What one projection asks for."""
    library: str                # auto / mkl / onednn: the fp32 GEMM library
    precision: Precision
    int8: Optional[object]      # the weight's Int8Weight, or None
    oi: bool                    # the weight is stored (out, in) (nn.Linear), else (in, out)


class Route(NamedTuple):
    name: str
    applies: Callable[[Tensor, Tensor, Call], bool]   # x (rows, in), weight, call: the guard and when it pays
    matmul: Callable[[Tensor, Tensor, Call], Tensor]  # x (rows, in) -> (rows, out)
    linear: Optional[Callable[[Tensor, Tensor, Optional[Tensor], Call], Tensor]]  # None: not for Linear layers


def _mm(x: Tensor, weight: Tensor, call: Call) -> Tensor:
    return x.mm(weight.t() if call.oi else weight)


def _torch_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], call: Call) -> Tensor:
    return F.linear(x, weight, bias)


def _with_bias(out: Tensor, bias: Optional[Tensor]) -> Tensor:
    if bias is None:  # in place without autograd (the product is a fresh tensor): a new one is a visible
        return out    # share of a small linear's time
    return out + bias if torch.is_grad_enabled() else out.add_(bias)


# --- int8: an Int8Weight, float32 activations quantised per row, where the product is large enough -------------
def _int8_applies(x: Tensor, weight: Tensor, call: Call) -> bool:
    return call.int8 is not None and takes_int8(x, call.int8.pair()[0])


def _int8_matmul(x: Tensor, weight: Tensor, call: Call) -> Tensor:
    return per_token_product(x.contiguous(), *call.int8.pair())


def _int8_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], call: Call) -> Tensor:
    return per_token_product(x.contiguous(), *call.int8.pair(), bias)


# --- bf16: inference of float32 tensors, the weight's bf16 copy prepacked for oneDNN -----------------------------
def _bf16_applies(x: Tensor, weight: Tensor, call: Call) -> bool:
    return (call.precision is Precision.BF16 and not torch.is_grad_enabled() and x.dtype is torch.float32
            and weight.dtype is torch.float32 and eager_cpu(x, weight) and gemm.onednn_available()
            and gemm.onednn_packs_bf16())


def _autocast_matmul(x: Tensor, weight: Tensor, call: Call) -> Tensor:
    """torch's product under autocast (which decides the dtype); in inference float32 U, as the fused
    recurrence reads it (training casts in autograd)."""
    if under_autocast(x.device.type):
        out = _mm(x, weight, call)
    else:  # the precision was asked for explicitly
        with torch.autocast(x.device.type, dtype=call.precision.autocast_dtype):
            out = _mm(x, weight, call)
    return out if torch.is_grad_enabled() else out.float()


def _autocast_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], call: Call) -> Tensor:
    """torch's ``F.linear`` under autocast; asked for explicitly (no autocast around the model), the output
    goes back to the input's dtype, which the model's other (float32) layers expect."""
    if under_autocast(x.device.type):
        return F.linear(x, weight, bias)
    with torch.autocast(x.device.type, dtype=call.precision.autocast_dtype):
        out = F.linear(x, weight, bias)
    return out.to(x.dtype)


# --- fp32: MKL or oneDNN, whichever is faster for the shape (gemm.py measures) -----------------------------------
def _onednn_applies(x: Tensor, weight: Tensor, call: Call) -> bool:
    return (call.precision is Precision.FP32 and x.dtype is torch.float32 and weight.dtype is torch.float32
            and eager_cpu(x, weight) and gemm.routes_to_onednn(x, weight, call.library, call.oi))


def _onednn_matmul(x: Tensor, weight: Tensor, call: Call) -> Tensor:
    return gemm.onednn_matmul(x, weight, call.library, call.oi)


def _onednn_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], call: Call) -> Tensor:
    return _with_bias(_onednn_matmul(x, weight, call), bias)


ROUTES = (
    Route("int8", _int8_applies, _int8_matmul, _int8_linear),
    # an int8 weight where int8 does not pay (few rows, autograd, export): its dequantised float copy
    Route("int8 as float", lambda x, w, call: call.int8 is not None, _mm, _torch_linear),
    Route("bf16 prepacked", _bf16_applies, lambda x, w, call: gemm.bf16_matmul(x, w, call.oi), None),
    Route("autocast", lambda x, w, call: call.precision.autocast_dtype is not None, _autocast_matmul,
          _autocast_linear),
    Route("onednn", _onednn_applies, _onednn_matmul, _onednn_linear),
    Route("torch", lambda x, w, call: True, _mm, _torch_linear),  # MKL on CPU; every other device and dtype
)


def route(x: Tensor, weight: Tensor, call: Call, linear: bool = False) -> Route:
    """The first route of ``ROUTES`` that serves this entry point and applies."""
    for entry in ROUTES:
        if (entry.linear is not None or not linear) and entry.applies(x, weight, call):
            return entry
    raise AssertionError("the last route applies to every product")


def matmul(x: Tensor, weight: Tensor, library: str = "auto", oi: bool = False, int8=None,
           precision: Optional[Precision] = None) -> Tensor:
    """x (rows, in) times the weight (in, out), or (out, in) with ``oi`` (then x Wᵀ), differentiable."""
    call = Call(library, of_autocast() if precision is None else precision, int8, oi)
    return route(x, weight, call).matmul(x, weight, call)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, library: str = "auto", int8=None,
           precision: Optional[Precision] = None) -> Tensor:
    """``F.linear`` (weight (out, in)) through the same table, for any leading dimensions."""
    call = Call(library, of_autocast() if precision is None else precision, int8, True)
    if x.dim() == 0:  # torch's own error
        return _torch_linear(x, weight, bias, call)
    flat = x.reshape(-1, x.shape[-1])
    run = route(flat, weight, call, linear=True).linear
    if run is _torch_linear:  # torch's own op on the input as given
        return F.linear(x, weight, bias)
    return run(flat, weight, bias, call).view(*x.shape[:-1], weight.shape[0])  # 1-D x: one row


__all__ = ["ROUTES", "Call", "Route", "linear", "matmul", "route"]
