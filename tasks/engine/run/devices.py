"""Where tensors run and in which precision: the one place that resolves ``trainer.device`` and
``trainer.precision`` and moves (nested) batches to a device."""
from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor

PRECISIONS = ("fp32", "bf16", "fp16")


def autocast(device: torch.device, precision: str):
    if precision not in PRECISIONS:
        raise ValueError(f"trainer.precision: expected one of {list(PRECISIONS)}, received {precision!r}")
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("trainer.precision=fp16 needs CUDA (GradScaler); on CPU use trainer.precision=bf16 or fp32")
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"trainer.device: received {name!r} but CUDA is not available; use trainer.device=cpu or auto")
    return device


def move_to_device(obj: Any, device: torch.device) -> Any:
    """Every tensor of a (nested) batch on ``device``; other values unchanged."""
    if isinstance(obj, Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, dict):
        return {k: move_to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_to_device(v, device) for v in obj)
    return obj
