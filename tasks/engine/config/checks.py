"""One validation pass over a composed config, before any data is loaded or any model is built.

    check_run_config(cfg)      # seed, trainer.* (schema + the rules across keys), the environment
    config = run_config(cfg)   # the typed run config: the run context builds it once, readers take its sections

Command-line overrides arrive as whatever YAML makes of them (``trainer.max_steps=abc`` is the string
"abc"); unchecked, a wrong value surfaces minutes later as a TypeError deep inside the loop, or is
accepted silently (``max_steps=-1`` trains 0 steps). Every error names the key, the value received
and what is allowed. The types and ranges of the keys live in the schemas (``trainer_schema.py``,
``tasks/common/model_schemas.py``, each task's ``schema.py``); the task's keys and its model's are
checked by ``Task.check_config()``, also before data loading.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import torch

from sru.ops.precision import Precision

from tasks.engine.errors import ConfigError
from tasks.engine.config.cores import usable_cores
from tasks.engine.config.schema import check_number, typed
from tasks.engine.config.trainer_schema import TrainerConfig, trainer_config

DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def check_trainer(trainer: Mapping[str, Any]) -> TrainerConfig:
    """The trainer schema, then what no single key says: a budget is set, the device exists, the
    precision runs on it. Returns the typed trainer config."""
    t = typed(trainer, TrainerConfig, "trainer", see="conf/trainer/default.yaml")
    if t.max_epochs is None and t.max_steps is None:
        raise ConfigError("trainer: expected trainer.max_epochs or trainer.max_steps to be set, received both null")
    device = t.device
    if not DEVICE_PATTERN.match(device):
        raise ConfigError(f"trainer.device: expected auto, cpu, cuda or cuda:N, received {device!r}")
    cuda = torch.cuda.is_available()
    if device.startswith("cuda") and not cuda:
        raise ConfigError(f"trainer.device={device}: CUDA is not available here; use trainer.device=cpu or auto")
    try:
        Precision(t.precision).check_device("cuda" if cuda and device != "cpu" else "cpu")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    check_threads(t.num_threads)
    return t


def check_threads(num_threads: Optional[int]) -> None:
    """More threads than cores only makes the threads wait for each other (a team of 10,000 on 2 cores)."""
    cores = usable_cores()
    if num_threads is not None and num_threads > cores:
        raise ConfigError(f"trainer.num_threads={num_threads} is more than the {cores} CPU cores this process may "
                          f"use; give at most trainer.num_threads={cores}, or null for the cores free at start")


def check_run_config(cfg: Mapping[str, Any]) -> None:
    """Everything the runner can check before the task touches data (task and model keys: the task's
    check_config)."""
    check_number("seed", cfg["seed"], 0, integer=True, allow_none=True)
    check_lr_moves(check_trainer(cfg["trainer"]))


def check_lr_moves(t: TrainerConfig) -> None:
    """A run of train.py whose lr is 0 throughout trains silently for nothing (fit() itself allows it: a test
    may want weights that never change)."""
    optimizer, scheduler = t.optimizer, t.scheduler
    rises = scheduler.name == "cosine" and scheduler.min_lr > 0  # lr -> min_lr from 0
    if optimizer.lr == 0 and not rises:
        raise ConfigError("trainer.optimizer.lr=0: no step would change a weight (every schedule scales lr; only "
                          "cosine with min_lr > 0 rises from 0). Set trainer.optimizer.lr > 0")


@dataclass(frozen=True)
class RunConfig:
    """A run's config typed once, after the checks: what the trainer, the evaluation and the inference
    commands read (``ctx.config`` of the run context). The composed mapping itself stays plain for what
    saves it (checkpoints, .hydra/, model.pt) and for Hydra; the task types its own section
    (``Task.task_cfg``), the encoders theirs (``check_encoder_config``)."""
    seed: Optional[int]
    trainer: TrainerConfig


def run_config(cfg: Mapping[str, Any]) -> RunConfig:
    seed = cfg["seed"]
    return RunConfig(seed=None if seed is None else int(seed), trainer=trainer_config(cfg))
