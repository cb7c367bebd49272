"""Checks on what ``run=`` names and on the model file read from it, each a one-line refusal before any
model is built (docs/failures.md, "Model files"):

- ``describe_special``: a device, FIFO or socket named as ``run=`` is said to be what it is (torch.load needs
  a regular, seekable file), never "no such file";
- ``check_task_field``: model.pt's ``task`` field must name a task of this code and agree with its saved
  config (an edited or mixed-up file would otherwise run as whichever of the two the loader reads);
- ``check_finite_weights``: a NaN or infinite weight makes every prediction NaN (or a sampler fail deep
  inside torch); the tensor is named so the user knows the file, not their input, is at fault.
"""
from __future__ import annotations

import stat
from pathlib import Path
from typing import Any, Mapping, Optional

import torch

from tasks.engine.base import available_tasks
from tasks.engine.errors import RunError

KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


class ModelFileError(RunError, ValueError):
    """A model file or run= path evaluate.py / predict.py cannot use (exit status 2)."""


def describe_special(path: Path) -> Optional[str]:
    """What ``path`` is when it exists but is neither a regular file nor a directory; None otherwise."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return next((name for test, name in KINDS if test(mode)), None)


def refuse_special(path: Path) -> None:
    kind = describe_special(path)
    if kind is not None:
        raise ModelFileError(f"run={path}: {kind}, not a model file or run directory; a model is read from a "
                             f"regular file (copy it to one first) or a train.py run directory")


def check_task_field(saved: Mapping[str, Any], path: Path) -> None:
    """model.pt's ``task`` names a task this code has, the same one its saved config was trained as."""
    field, configured = saved.get("task"), saved["config"]["task"].get("name")
    known = available_tasks()
    if field not in known:
        raise ModelFileError(f"{path}: its task field is {field!r}, which names no task of this code "
                             f"({', '.join(known)}); the file is damaged or from another project: re-export it "
                             f"with `predict.py run=<run dir> export=<new file>`")
    if field != configured:
        raise ModelFileError(f"{path}: its task field says task={field} but its saved config was trained as "
                             f"task={configured}; the file was edited or mixed up: re-export it with "
                             f"`predict.py run=<run dir> export=<new file>`")


def check_finite_weights(weights: Mapping[str, Any], path: Path) -> None:
    """The first floating tensor holding NaN or inf is named, with how many of its values are."""
    if not isinstance(weights, Mapping):  # not weights at all: the shape check says so
        return
    for name, tensor in weights.items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            continue
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise ModelFileError(f"{path}: weight {name} holds {bad} NaN or infinite value(s) of "
                                 f"{tensor.numel()}; every output would be NaN. Use another checkpoint of its "
                                 f"run (run=<run dir> checkpoint=last) or retrain "
                                 f"(docs/failures.md#nan--inf--exploding-loss)")
