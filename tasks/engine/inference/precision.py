"""``precision=fp32|bf16|int8`` of predict.py and evaluate.py (docs/inference.md#precision): the saved
model.pt stays fp32; the model is put in the asked precision when loaded.

- fp32: as trained (float32 weights, no autocast);
- bf16: ``torch.autocast(bfloat16)`` around inference: the SRU's projections in bf16, its recurrence in
  fp32 (warned once where the CPU has no native bf16: slower there);
- int8: ``sru.quantize_dynamic`` (int8 per-channel projections of every SRU layer and Linear, dynamic
  activation quantisation, fp32 recurrence), CPU only.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from sru.ops.precision import INFERENCE, Precision, parse
from tasks.engine.inference.loader import InferenceInputError


def check_precision(value: Optional[str], device: torch.device, option: str = "precision") -> Optional[str]:
    """The precision asked for (None: not asked), refused in one line where it cannot run."""
    if value is None:
        return None
    try:
        value = parse(value, INFERENCE, option)
    except ValueError as err:
        raise InferenceInputError(str(err)) from None
    if value is Precision.INT8:
        from sru.quantize import check_int8_device
        try:
            check_int8_device(device)
        except ValueError as err:
            raise InferenceInputError(str(err)) from None
    return value


def apply_precision(model: nn.Module, precision: Optional[str], device: torch.device,
                    run_precision: str = "fp32", keep_fp32: Sequence[str] = ()) -> tuple:
    """(model, the autocast precision to run it under). ``precision`` None keeps the run's own
    ``trainer.precision``; int8 quantises (a copy: the loaded fp32 model stays usable), leaving the
    submodules ``keep_fp32`` (the task's ``int8_keep_fp32``) in float32."""
    if precision is None:
        return model, run_precision
    if precision is Precision.INT8:
        from sru import quantize_dynamic
        return quantize_dynamic(model, keep_fp32=keep_fp32), Precision.FP32
    if precision is Precision.BF16 and device.type == "cpu":
        from sru.quantize import warn_if_bf16_emulated
        warn_if_bf16_emulated()
    return model, precision
