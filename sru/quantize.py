"""Lower-precision CPU inference for models containing SRU / SRU++ layers.

``quantize_dynamic(model)``: every SRU layer's projection weights (``weight``, ``weight_proj``) and
every ``nn.Linear`` of the model (SRU++'s attention and projections, the task heads, translation's
Transformer layers, each made a ``sru.linear.DispatchedLinear``) get an int8 copy with one scale per
output channel (``sru.ops.quantized.Int8Weight``, a submodule: copies, pickles and state_dicts carry it); activations are quantised per
token (one scale per row) at run time; the fused recurrence runs unchanged in float32 (c keeps
float32). The kernel is torch's maintained int8 linear of oneDNN (``torch.ops.onednn.qlinear_pointwise``:
AMX, VNNI or AVX2 kernels; torch's dynamic quantised linear on fbgemm where that is missing or asked
for), reached through sru/ops/cpu/int8.py (which says how rows are quantised one scale each, and which
small products stay float32); docs/ops.md says why this kernel and not ``torch._int_mm`` or torchao.

``to_precision(model, precision)``: the one call that puts a model in a precision. int8 is
``quantize_dynamic``; bf16 sets ``precision=Precision.BF16`` on every SRU layer and every ``nn.Linear`` (made a
``DispatchedLinear``), which hand it to the projection entry point with each product (sru/ops/cpu/routes.py:
bf16 projections through oneDNN, the recurrence in float32), with no autocast around the model. Under
``torch.autocast("cpu", torch.bfloat16)`` (training) the layer takes the same bf16 route for its products.
``bf16_native()`` says whether this CPU computes bf16 natively (AVX512-BF16 / AMX) and
``warn_if_bf16_emulated()`` warns once where it does not (slower than fp32 there).
"""
import copy
import warnings
from typing import Iterable, Tuple, Union

import torch
from torch import nn

from sru.cell_base import RecurrentCellBase
from sru.linear import DispatchedLinear
from sru.ops.backends import int8_engine
from sru.ops.precision import Precision, bf16_native, parse  # noqa: F401  (bf16_native: public here too)
from sru.ops.quantized import quantize_weight  # noqa: F401  (sru.quantize's public API)

_warned = set()


def check_int8_device(device) -> None:
    """One line naming what works when int8 cannot run on ``device`` / this torch."""
    if torch.device(device).type != "cpu":
        raise ValueError(f"precision=int8 runs on CPU only (torch's quantised linear has no {torch.device(device).type} "
                         "kernel); use device=cpu, or precision=fp32 / bf16 on this device")
    if int8_engine() is None:
        raise ValueError("precision=int8 needs oneDNN's int8 linear or torch's x86, fbgemm or onednn quantised "
                         f"engine, which this torch lacks (engines: {torch.backends.quantized.supported_engines}); "
                         "use precision=fp32 or bf16")


def warn_if_bf16_emulated() -> bool:
    """Warn once when bf16 is emulated here (then slower than fp32). Returns ``bf16_native()``."""
    slower = Precision.BF16.slower_than_fp32("cpu")
    if slower and "bf16-emulated" not in _warned:
        _warned.add("bf16-emulated")
        warnings.warn(slower, stacklevel=2)
    return not slower


def kept_names(model: nn.Module, keep_fp32: Union[str, Iterable[str]]) -> Tuple[str, ...]:
    """``keep_fp32`` as a tuple of submodule names, each checked against ``model.named_modules()``
    (a misspelt name would otherwise quantise the very module it meant to keep)."""
    if not isinstance(keep_fp32, (str, Iterable)):
        raise ValueError(f"quantize_dynamic: keep_fp32 expected a submodule name or a list of them, got "
                         f"{type(keep_fp32).__name__}")
    keep = (keep_fp32,) if isinstance(keep_fp32, str) else tuple(keep_fp32)
    names = [name for name, _ in model.named_modules() if name]
    for name in keep:
        if not isinstance(name, str) or name not in names:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise ValueError(f"quantize_dynamic: keep_fp32 names {name!r}, which is no submodule of this "
                             f"{type(model).__name__}; give names from model.named_modules() ({shown})")
    return keep


def _convert(model: nn.Module, keep: Tuple[str, ...], cell_fn, linear_fn) -> None:
    """In place: ``cell_fn`` on every SRU layer, ``linear_fn`` on every ``nn.Linear`` (made a
    ``DispatchedLinear``; its result replaces it) of ``model``, except the submodules named in ``keep``."""
    skipped = lambda name: any(name == k or name.startswith(k + ".") for k in keep)  # noqa: E731
    for name, module in list(model.named_modules()):
        if skipped(name):
            continue
        if isinstance(module, RecurrentCellBase):
            cell_fn(module)
        for child_name, child in list(module._modules.items()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not skipped(full):
                linear = child if isinstance(child, DispatchedLinear) else DispatchedLinear.from_linear(child)
                module._modules[child_name] = linear_fn(linear)


def quantize_dynamic(model: nn.Module, keep_fp32: Union[str, Iterable[str]] = (),
                     inplace: bool = False) -> nn.Module:
    """``model`` with int8 projections (see the module docstring). ``keep_fp32``: the name, or
    names, of submodules (as in ``named_modules``) left in float32, e.g. an output softmax."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"quantize_dynamic expected an nn.Module, got {type(model).__name__}")
    if not isinstance(inplace, bool):  # a string is truthy: inplace='no' quantised the caller's model
        raise ValueError(f"quantize_dynamic expected inplace to be True or False, got {inplace!r}")
    if int8_engine() is None:
        check_int8_device("cpu")  # raises the one-line error
    keep = kept_names(model, keep_fp32)
    model = model if inplace else copy.deepcopy(model)
    _convert(model, keep, lambda cell: cell.quantize_int8_(), lambda linear: linear.quantize_int8_())
    return model


def _with_precision(module: nn.Module, precision: Precision) -> nn.Module:
    module.precision = precision
    return module


def to_precision(model: nn.Module, precision: Union[str, Precision], keep_fp32: Union[str, Iterable[str]] = (),
                 inplace: bool = False) -> nn.Module:
    """``model`` in ``precision`` (fp32 / bf16 / int8, a ``sru.Precision`` or its name) for inference:
    int8 through ``quantize_dynamic``, bf16 as each layer's own precision (module docstring), fp32 as
    trained. ``keep_fp32``: submodule names left in float32 (int8 and bf16). A copy unless ``inplace``."""
    precision = parse(precision, (Precision.FP32, Precision.BF16, Precision.INT8), "to_precision")
    if precision is Precision.INT8:
        return quantize_dynamic(model, keep_fp32, inplace)
    keep = kept_names(model, keep_fp32)
    model = model if inplace else copy.deepcopy(model)
    set_it = lambda module: _with_precision(module, precision)  # noqa: E731
    _convert(model, keep, set_it, set_it)
    return model
