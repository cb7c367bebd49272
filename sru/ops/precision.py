"""``Precision``: the one definition of the precision names (fp32, bf16, fp16, int8) that the layer,
the engine's commands and config, and the bench share (``sru.Precision``); which of them each use accepts; and the
autocast dtype of each.

A ``str`` enum, so a member equals its name (``Precision.BF16 == "bf16"``) and configs, command lines
and saved records keep plain strings. Where each precision runs in the layer: docs/ops.md#precision-routes-sruopscpuroutespy.
"""
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


_AUTOCAST_DTYPES = {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}  # asked per projection


TRAINING: Tuple[Precision, ...] = (Precision.FP32, Precision.BF16, Precision.FP16)   # trainer.precision
INFERENCE: Tuple[Precision, ...] = (Precision.FP32, Precision.BF16, Precision.INT8)  # predict / evaluate
AUTOCAST: Tuple[Precision, ...] = (Precision.FP32, Precision.BF16)                   # what a bench times


def names(precisions: Iterable[Precision]) -> Tuple[str, ...]:
    """The plain names, e.g. for ``Literal[...]`` or argparse ``choices``."""
    return tuple(p.value for p in precisions)


TRAINING_NAMES, INFERENCE_NAMES, AUTOCAST_NAMES = names(TRAINING), names(INFERENCE), names(AUTOCAST)


def parse(value, allowed: Iterable[Precision] = tuple(Precision), option: str = "precision") -> Precision:
    """``value`` as a ``Precision`` among ``allowed``, else one line naming the choices."""
    allowed = tuple(allowed)
    for member in allowed:
        if str(value) == member.value:
            return member
    raise ValueError(f"{option}={value}: expected one of {list(names(allowed))}")


__all__ = ["AUTOCAST", "AUTOCAST_NAMES", "INFERENCE", "INFERENCE_NAMES", "Precision", "TRAINING",
           "TRAINING_NAMES", "names", "parse"]
