"""Tasks by name: ``build_task(cfg)`` imports ``tasks.<cfg.task.name>`` and instantiates its ``TASK``.

Adding a task means adding a folder with an ``__init__.py`` that sets ``TASK`` (and a
``conf/task/<name>.yaml``), not editing a table here. The import is by name (a plugin lookup), so the
engine never imports a task folder's code directly.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, List, Mapping

from tasks.engine.base import Task
from tasks.engine.errors import ConfigError

TASKS_DIR = Path(__file__).resolve().parents[1]
NOT_TASKS = ("engine", "common", "corpora", "paper")


def available_tasks() -> List[str]:
    return sorted(p.parent.name for p in TASKS_DIR.glob("*/__init__.py") if p.parent.name not in NOT_TASKS)


def task_class(name: str) -> type:
    if name not in available_tasks():
        raise ConfigError(f"task.name: expected one of {available_tasks()}, received {name!r}. "
                          f"Pick one with task=<name>.")
    return importlib.import_module(f"tasks.{name}").TASK


def build_task(cfg: Mapping[str, Any]) -> Task:
    return task_class(cfg["task"]["name"])(cfg)
