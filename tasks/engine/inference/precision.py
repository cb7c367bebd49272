"""``precision=fp32|bf16|int8`` of predict.py and evaluate.py (docs/inference.md#precision): the saved
model.pt stays fp32; the model is put in the asked precision when loaded.

- fp32: as trained (float32 weights, no autocast);
- bf16: ``sru.to_precision(model, "bf16")``: every SRU layer and Linear gets ``precision=Precision.BF16`` and
  hands it to the projection entry point with each product (bf16 projections, fp32 recurrence; the rest of the
  model in fp32; warned once where the CPU has no native bf16: slower there). No autocast around the model;
- int8: ``sru.to_precision(model, "int8")`` (``sru.quantize_dynamic``: int8 per-channel projections of every
  SRU layer and Linear, dynamic activation quantisation, fp32 recurrence), CPU only.

A run trained in fp16 (CUDA) and evaluated as trained keeps fp16 autocast: the one precision of a command that is
not the model's own.
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
    """(model, the autocast precision to run it under: FP32, except an fp16 run evaluated as trained).
    ``precision`` None keeps the run's own ``trainer.precision``; bf16 and int8 convert a copy (the loaded
    fp32 model stays usable); int8 leaves the submodules ``keep_fp32`` (the task's ``int8_keep_fp32``) in
    float32."""
    own = Precision(precision if precision is not None else run_precision)
    if own not in INFERENCE:  # fp16, trained on CUDA under autocast
        return model, own
    if own is Precision.FP32:
        return model, own
    if own is Precision.BF16 and device.type == "cpu":
        from sru.quantize import warn_if_bf16_emulated
        warn_if_bf16_emulated()
    from sru import to_precision
    return to_precision(model, own, keep_fp32 if own is Precision.INT8 else ()), Precision.FP32


def check_compare_differs(compare: Optional[str], precision: Optional[str], run_precision: str) -> None:
    """compare= names a second precision; the evaluation's own (precision=, else the run's trainer.precision)
    would only score the split twice."""
    own = precision if precision is not None else run_precision
    if compare is not None and str(compare) == str(own):
        said = f"precision={own}" if precision is not None else f"the run's own trainer.precision={own}"
        example = f"precision={'int8' if str(compare) == 'fp32' else compare} compare=fp32"
        raise InferenceInputError(f"compare={compare}: this evaluation already runs in {said}; compare two "
                                  f"precisions, e.g. {example}")
