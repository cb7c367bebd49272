"""``Precision``: the one definition of the precision names (fp32, bf16, fp16, int8) that the layer,
the engine's commands and config, and the bench share (``sru.Precision``); which of them each use accepts; and
what follows from each, asked here instead of decided where it is used: its autocast dtype and context, the
device it trains on, whether it scales the loss, whether it runs slower than fp32 on this CPU; the dtype the
recurrence runs in; the one read of the global autocast state (``under_autocast``, ``of_autocast``).

A ``str`` enum, so a member equals its name (``Precision.BF16 == "bf16"``) and configs, command lines
and saved records keep plain strings. Where each precision runs in the layer:
docs/ops.md#precision-routes-sruopscpuroutespy. tests/test_precision_design.py counts the files that decide.
"""
import contextlib
from enum import Enum
from typing import Iterable, Optional, Tuple

import torch


class Precision(str, Enum):
    FP32 = "fp32"   # float32 weights and activations (MKL or oneDNN GEMM)
    BF16 = "bf16"   # bf16 projections (oneDNN), float32 recurrence
    FP16 = "fp16"   # float16 autocast: training on CUDA only
    INT8 = "int8"   # int8 weights per output channel, activations per token (sru.quantize_dynamic)

    def __str__(self) -> str:
        return self.value

    @property
    def autocast_dtype(self) -> Optional[torch.dtype]:
        """The dtype ``torch.autocast`` runs this precision under; None: no autocast."""
        return _AUTOCAST_DTYPES.get(self)

    def autocast(self, device_type: str):
        """The context a whole model runs under in this precision (training): ``torch.autocast`` with its
        dtype, else none."""
        dtype = self.autocast_dtype
        return contextlib.nullcontext() if dtype is None else torch.autocast(device_type, dtype=dtype)

    def check_device(self, device_type: str) -> None:
        """One line naming the fix where this precision cannot train on ``device_type``."""
        if self is Precision.FP16 and device_type != "cuda":
            raise ValueError("trainer.precision=fp16 needs CUDA (GradScaler); on CPU use trainer.precision=bf16 "
                             "or fp32")

    def slower_than_fp32(self, device_type: str) -> Optional[str]:
        """Why this precision runs slower than fp32 on ``device_type`` (one line naming the reason), else None:
        bf16 on a CPU without native bf16 products, where oneDNN emulates them (``bench.precision.training``
        measures the step; with native bf16 it pays, AMX or not)."""
        if self is Precision.BF16 and device_type == "cpu" and not bf16_native():
            return (f"this CPU ({torch.backends.cpu.get_cpu_capability()}) has neither avx512_bf16 nor amx_bf16 in "
                    "its flags, so bf16 products are emulated, slower than fp32")
        return None

    def fuses_cpu_training(self, dtype: torch.dtype) -> bool:
        """Whether the fused CPU training layer (sru/ops/cpu/fused_layer.py) serves a layer of ``dtype`` in this
        precision: fp32 (no autocast) in the kernel's float32 / float64; bf16 autocast for a float32 layer, its
        products in bf16 (U read as bf16 by the kernel, ``widened_in_kernel``), the recurrence and every
        gradient float32."""
        if self is Precision.FP32:
            return dtype is torch.float32 or dtype is torch.float64
        return self is Precision.BF16 and dtype is torch.float32

    def attends_in_fp32(self, device_type: str) -> bool:
        """Whether attention computes in fp32 when training in this precision: bf16 on CPU, where the flash kernel's
        bf16 backward took 4.4x its fp32 time on the Zen 4 (the translation model; its projections stay bf16)."""
        return self is Precision.BF16 and device_type == "cpu"

    @property
    def plain_float_products(self) -> bool:
        """A layer of this precision computes its products on its own float weight (no int8 weight, no bf16 copy):
        what the fused SRU++ decoding step (sru/srupp_decoding/one_call.py) can compute in place of it."""
        return self is Precision.FP32

    @property
    def scales_loss(self) -> bool:
        """fp16 training scales the loss (GradScaler), which skips steps with inf/NaN gradients by design."""
        return self is Precision.FP16


_AUTOCAST_DTYPES = {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}  # asked per projection


TRAINING: Tuple[Precision, ...] = (Precision.FP32, Precision.BF16, Precision.FP16)   # trainer.precision
INFERENCE: Tuple[Precision, ...] = (Precision.FP32, Precision.BF16, Precision.INT8)  # predict / evaluate
AUTOCAST: Tuple[Precision, ...] = (Precision.FP32, Precision.BF16)                   # what a bench times


def names(precisions: Iterable[Precision]) -> Tuple[str, ...]:
    """The plain names, e.g. for ``Literal[...]`` or argparse ``choices``."""
    return tuple(p.value for p in precisions)


TRAINING_NAMES, INFERENCE_NAMES, AUTOCAST_NAMES = names(TRAINING), names(INFERENCE), names(AUTOCAST)


_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def bf16_flags() -> Tuple[str, ...]:
    """The native-bf16 flags of this CPU (``/proc/cpuinfo``; elsewhere as torch's cpuinfo reports them)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), None)
    except OSError:
        flags = None
    if flags is not None:
        return tuple(flag for flag in _BF16_FLAGS if flag in flags)
    cpu = torch.cpu
    found = (getattr(cpu, "_is_avx512_bf16_supported", lambda: False)(),
             getattr(cpu, "_is_amx_tile_supported", lambda: False)())
    return tuple(flag for flag, present in zip(_BF16_FLAGS, found) if present)


def bf16_native() -> bool:
    """Whether this CPU computes bf16 products natively (AVX512-BF16 or AMX)."""
    return bool(bf16_flags())


def under_autocast(device_type: str = "cpu") -> bool:
    """Whether ``torch.autocast`` is on for ``device_type`` right now: the one read of that global state."""
    return torch.is_autocast_enabled(device_type)


def of_autocast(device_type: str = "cpu") -> Precision:
    """The precision ``torch.autocast`` asks for on ``device_type`` right now (FP32 outside autocast)."""
    if not under_autocast(device_type):
        return Precision.FP32
    return Precision.BF16 if torch.get_autocast_dtype(device_type) is torch.bfloat16 else Precision.FP16


def without_autocast(device_type: str):
    """A context that turns autocast off where it is on (the recurrence runs in the dtype it chose)."""
    return torch.autocast(device_type, enabled=False) if under_autocast(device_type) else contextlib.nullcontext()


def half_recurrence(dtype: torch.dtype, amp_recurrence_fp16: bool) -> bool:
    """Whether the recurrence runs in float16: only for float16 U when ``amp_recurrence_fp16`` asks for it
    (the official package's rule)."""
    return amp_recurrence_fp16 and dtype == torch.float16


def recurrence_dtype(dtype: torch.dtype, amp_recurrence_fp16: bool = False) -> torch.dtype:
    """The dtype the recurrence runs and keeps c in: float32 for half-precision inputs (c is accumulated
    over time), float16 where ``half_recurrence`` says so. TorchScript compiles it (sru/scripting/)."""
    if dtype == torch.float16 or dtype == torch.bfloat16:
        return torch.float16 if half_recurrence(dtype, amp_recurrence_fp16) else torch.float32
    return dtype


def widened_in_kernel(dtype: torch.dtype) -> bool:
    """Whether the fused CPU kernel reads U stored in ``dtype`` and widens it to float32 itself (writing grad U
    back in it): bfloat16, the products' dtype in bf16 training. Other half dtypes are converted before it."""
    return dtype is torch.bfloat16


def explicit_float_precision(value, owner: str) -> Optional["Precision"]:
    """A layer's own precision as it stores it: None for FP32 (then a surrounding autocast still applies),
    BF16 / FP16 as given; INT8 is a weight's type, not a flag: one line naming how to get it."""
    precision = parse(value, (Precision.FP32, Precision.BF16, Precision.FP16, Precision.INT8), f"{owner}.precision")
    if precision is Precision.INT8:
        raise ValueError(f"{owner}.precision=int8: int8 weights come from sru.quantize_dynamic(model) or "
                         "sru.to_precision(model, 'int8'), not from setting the attribute")
    return None if precision is Precision.FP32 else precision


def parse(value, allowed: Iterable[Precision] = tuple(Precision), option: str = "precision") -> Precision:
    """``value`` as a ``Precision`` among ``allowed``, else one line naming the choices."""
    allowed = tuple(allowed)
    for member in allowed:
        if str(value) == member.value:
            return member
    raise ValueError(f"{option}={value}: expected one of {list(names(allowed))}")


__all__ = ["AUTOCAST", "AUTOCAST_NAMES", "INFERENCE", "INFERENCE_NAMES", "Precision", "TRAINING", "TRAINING_NAMES",
           "bf16_flags", "bf16_native", "explicit_float_precision", "half_recurrence", "names", "of_autocast", "parse",
           "recurrence_dtype", "under_autocast", "widened_in_kernel", "without_autocast"]
