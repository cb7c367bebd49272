"""Tasks of the SRU experiment framework: one sub-package per task, each exposing ``TASK``.

``build_task(cfg)`` imports ``tasks.<cfg.task.name>`` and instantiates its ``TASK`` class, so adding a
task means adding a folder (and a ``conf/task/<name>.yaml``), not editing a registry.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, List, Mapping

from tasks.base import Task

__all__ = ["Task", "build_task", "available_tasks"]


def available_tasks() -> List[str]:
    here = Path(__file__).parent
    return sorted(p.parent.name for p in here.glob("*/__init__.py"))


def build_task(cfg: Mapping[str, Any]) -> Task:
    name = cfg["task"]["name"]
    if name not in available_tasks():
        raise ValueError(f"task.name: expected one of {available_tasks()}, received {name!r}. "
                         f"Pick one with task=<name>.")
    module = importlib.import_module(f"tasks.{name}")
    return module.TASK(cfg)
