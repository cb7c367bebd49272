"""One validation pass over a composed config, before any data is loaded or any model is built.

    check_run_config(cfg)      # trainer.*, seed, and the task keys every task shares

Command-line overrides arrive as whatever YAML makes of them (``trainer.max_steps=abc`` is the string
"abc"); unchecked, a wrong value surfaces minutes later as a TypeError deep inside the loop, or is
accepted silently (``max_steps=-1`` trains 0 steps). Every error here names the key, the value received
and the allowed range. Model keys are checked by ``tasks.common.encoders.check_encoder_config`` and task-specific
keys by each task's ``check_config()``, both also before data loading.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Mapping, Optional

from omegaconf import OmegaConf

from tasks.engine.devices import PRECISIONS
from tasks.engine.errors import ConfigError
from tasks.engine.optim import OPTIMIZERS, SCHEDULES

DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def as_plain(cfg: Any) -> Any:
    """A composed (OmegaConf) config node as plain dicts/lists, interpolations resolved; anything else as is."""
    return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg


def _number_kind(integer: bool) -> str:
    return "an integer" if integer else "a number"


def check_number(key: str, value: Any, low: Optional[float] = None, high: Optional[float] = None, *,
                 integer: bool = False, low_open: bool = False, high_open: bool = False,
                 allow_none: bool = False) -> None:
    """Raise ConfigError unless ``value`` is an int/float (int when ``integer``) inside the given bounds."""
    if value is None and allow_none:
        return
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    ok = ok and not isinstance(value, bool) and (integer or math.isfinite(value))
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if ok:
        return
    if low is not None and high is not None:
        span = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    elif low is not None:
        span = f"{'>' if low_open else '>='} {low}"
    elif high is not None:
        span = f"{'<' if high_open else '<='} {high}"
    else:
        span = ""
    null = " or null" if allow_none else ""
    raise ConfigError(f"{key}: expected {_number_kind(integer)} {span}{null}, received {value!r}".replace("  ", " "))


def check_choice(key: str, value: Any, choices) -> None:
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {list(choices)}, received {value!r}")


def check_bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, received {value!r}")


def check_trainer(t: Mapping[str, Any]) -> None:
    """Types and ranges of every trainer.* key the loop reads."""
    check_number("trainer.max_epochs", t.get("max_epochs"), 1, integer=True, allow_none=True)
    check_number("trainer.max_steps", t.get("max_steps"), 1, integer=True, allow_none=True)
    if t.get("max_epochs") is None and t.get("max_steps") is None:
        raise ConfigError("trainer: expected trainer.max_epochs or trainer.max_steps to be set, received both null")
    check_number("trainer.max_minutes", t.get("max_minutes"), 0, low_open=True, allow_none=True)
    device = t.get("device")
    if not isinstance(device, str) or not DEVICE_PATTERN.match(device):
        raise ConfigError(f"trainer.device: expected auto, cpu, cuda or cuda:N, received {device!r}")
    check_number("trainer.num_threads", t.get("num_threads"), 1, integer=True, allow_none=True)
    check_choice("trainer.precision", t.get("precision"), PRECISIONS)
    check_number("trainer.accumulate", t.get("accumulate"), 1, integer=True, allow_none=True)
    check_number("trainer.grad_clip", t.get("grad_clip"), 0, allow_none=True)
    opt = t.get("optimizer") or {}
    check_choice("trainer.optimizer.name", opt.get("name"), OPTIMIZERS)
    check_number("trainer.optimizer.lr", opt.get("lr"), 0)
    check_number("trainer.optimizer.weight_decay", opt.get("weight_decay", 0.0), 0)
    check_number("trainer.optimizer.momentum", opt.get("momentum", 0.0), 0, 1, high_open=True)
    check_number("trainer.optimizer.eps", opt.get("eps", 1e-8), 0, low_open=True)
    betas = opt.get("betas", (0.9, 0.999))
    if isinstance(betas, str) or not isinstance(betas, Sequence) or len(betas) != 2:
        raise ConfigError(f"trainer.optimizer.betas: expected two numbers in [0, 1), received {betas!r}")
    for i, b in enumerate(betas):
        check_number(f"trainer.optimizer.betas[{i}]", b, 0, 1, high_open=True)
    sched = t.get("scheduler") or {}
    check_choice("trainer.scheduler.name", sched.get("name"), SCHEDULES)
    check_number("trainer.scheduler.warmup_steps", sched.get("warmup_steps", 0), 0, integer=True, allow_none=True)
    check_number("trainer.scheduler.decay", sched.get("decay", 1.0), 0, 1, low_open=True, allow_none=True)
    check_number("trainer.scheduler.decay_start_epoch", sched.get("decay_start_epoch", 0), 0, integer=True,
                 allow_none=True)
    check_number("trainer.scheduler.min_lr", sched.get("min_lr", 0.0), 0, allow_none=True)
    check_number("trainer.scheduler.total_steps", sched.get("total_steps"), 1, integer=True, allow_none=True)
    check_number("trainer.scheduler.d_model", sched.get("d_model"), 1, integer=True, allow_none=True)
    check_number("trainer.eval_every_steps", t.get("eval_every_steps"), 1, integer=True, allow_none=True)
    check_number("trainer.eval_max_batches", t.get("eval_max_batches"), 1, integer=True, allow_none=True)
    check_number("trainer.early_stopping_patience", t.get("early_stopping_patience"), 0, integer=True,
                 allow_none=True)
    check_number("trainer.log_every_steps", t.get("log_every_steps"), 1, integer=True, allow_none=True)
    for key in ("progress_bar", "plot"):
        if key in t:
            check_bool(f"trainer.{key}", t[key])
    explosion = t.get("explosion") or {}
    check_number("trainer.explosion.factor", explosion.get("factor"), 1, low_open=True, allow_none=True)
    check_number("trainer.explosion.patience", explosion.get("patience", 1), 1, integer=True)
    check_number("trainer.explosion.warmup_steps", explosion.get("warmup_steps", 0), 0, integer=True)


def check_task_common(task: Mapping[str, Any]) -> None:
    """Keys that mean the same in every task: batch sizes >= 1, every ``*dropout`` in [0, 1)."""
    for key in ("batch_size", "eval_batch_size"):
        if key in task:
            check_number(f"task.{key}", task[key], 1, integer=True, allow_none=key == "eval_batch_size")
    for key, value in task.items():
        if isinstance(key, str) and key.endswith("dropout"):
            check_number(f"task.{key}", value, 0, 1, high_open=True)


def check_run_config(cfg: Mapping[str, Any]) -> None:
    """Everything the runner can check before the task touches data (model keys: the task's check_config)."""
    if cfg.get("seed") is not None:
        check_number("seed", cfg["seed"], 0, integer=True, allow_none=True)
    check_trainer(cfg["trainer"])
    if "task" in cfg:
        check_task_common(cfg["task"])
