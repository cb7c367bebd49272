"""The schema of the ``trainer`` config group (conf/trainer/*.yaml): every key the loop reads, its type
and allowed range (values live in the YAML files; see ``tasks/engine/config/schema.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Literal, Mapping, Optional

from sru.ops.precision import TRAINING_NAMES
from tasks.engine.config.schema import key, typed

Optimizer = Literal["sgd", "adam", "adamw", "adamax", "radam"]
Schedule = Literal["constant", "step", "exponential", "noam", "cosine"]


@dataclass(kw_only=True)
class OptimizerConfig:
    name: Optimizer
    lr: float = key(low=0)
    weight_decay: float = key(low=0)
    momentum: float = key(low=0, high=1, high_open=True)        # sgd only
    betas: List[float] = key(low=0, high=1, high_open=True, length=2)   # adam* only
    eps: float = key(low=0, low_open=True)


@dataclass(kw_only=True)
class SchedulerConfig:
    name: Schedule
    warmup_steps: int = key(low=0)
    decay: float = key(low=0, high=1, low_open=True)       # step / exponential, per epoch
    decay_start_epoch: int = key(low=0)
    min_lr: float = key(low=0)                             # cosine floor
    total_steps: Optional[int] = key(low=1)                # cosine horizon; null: the run's planned steps
    d_model: Optional[int] = key(low=1)                    # noam scale; null: none (lr is the peak)


@dataclass(kw_only=True)
class ExplosionConfig:
    factor: Optional[float] = key(low=1, low_open=True)   # null: the explosion check is off
    patience: int = key(low=1)
    warmup_steps: int = key(low=0)


@dataclass(kw_only=True)
class TrainerConfig:
    optimizer: OptimizerConfig
    scheduler: SchedulerConfig
    max_epochs: Optional[int] = key(low=1)
    max_steps: Optional[int] = key(low=1)
    max_minutes: Optional[float] = key(low=0, low_open=True)   # a safety net, never the budget; null: none
    device: str = key()                                        # auto | cpu | cuda | cuda:N
    num_threads: Optional[int] = key(low=1)
    flush_denormal: bool = key()
    keep_freed_memory: bool = key()
    precision: Literal[TRAINING_NAMES] = key()  # sru/precision.py
    accumulate: int = key(low=1)
    grad_clip: Optional[float] = key(low=0)                   # null or 0: no clipping
    eval_every_steps: Optional[int] = key(low=1)              # null: at the end of every epoch
    eval_max_batches: Optional[int] = key(low=1)
    early_stopping_patience: Optional[int] = key(low=0)
    min_epochs: Optional[int] = key(low=1)                    # early stopping waits for them; null: none
    log_every_steps: int = key(low=1)
    progress_bar: bool = key()
    plot: bool = key()
    explosion: ExplosionConfig


def trainer_config(cfg: Mapping[str, Any]) -> TrainerConfig:
    """A run config's ``trainer`` section, checked and typed: the one way every reader gets it."""
    return typed(cfg["trainer"], TrainerConfig, "trainer", see="conf/trainer/default.yaml")
