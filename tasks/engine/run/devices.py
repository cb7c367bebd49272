"""Where tensors run and in which precision: the one place that resolves ``trainer.device`` and
``trainer.precision`` and moves (nested) batches to a device; and ``machine()``, the one description
of the machine a run or a measurement ran on (the paper's records, bench/harness.py)."""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from torch import Tensor

from sru.ops.precision import Precision, TRAINING_NAMES


def autocast(device: torch.device, precision: str):
    if precision not in TRAINING_NAMES:
        raise ValueError(f"trainer.precision: expected one of {list(TRAINING_NAMES)}, received {precision!r}")
    Precision(precision).check_device(device.type)
    return Precision(precision).autocast(device.type)


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


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what platform reports)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(threads: Optional[int] = None) -> Dict[str, Any]:
    """CPU, logical CPUs, threads (``threads`` or torch's setting), GPU, torch, Python and the date."""
    return {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "threads": threads or torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__, "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}
