"""The schema of the ``trainer`` config group (conf/trainer/*.yaml): every key the loop reads, its type
and allowed range (values live in the YAML files; see ``tasks/engine/schema.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Literal, Optional

from tasks.engine.schema import key

Optimizer = Literal["sgd", "adam", "adamw", "adamax", "radam"]
Schedule = Literal["constant", "step", "exponential", "noam", "cosine"]


@dataclass(kw_only=True)
class OptimizerConfig:
    name: Optimizer
    lr: float = key(low=0)
    weight_decay: float = key(0.0, low=0)
    momentum: float = key(0.0, low=0, high=1, high_open=True)        # sgd only
    betas: List[float] = key([0.9, 0.999], low=0, high=1, high_open=True, length=2)   # adam* only
    eps: float = key(1e-8, low=0, low_open=True)


@dataclass(kw_only=True)
class SchedulerConfig:
    name: Schedule
    warmup_steps: Optional[int] = key(0, low=0)
    decay: Optional[float] = key(1.0, low=0, high=1, low_open=True)  # step / exponential, per epoch
    decay_start_epoch: Optional[int] = key(0, low=0)
    min_lr: Optional[float] = key(0.0, low=0)                         # cosine floor
    total_steps: Optional[int] = key(None, low=1)                     # cosine horizon
    d_model: Optional[int] = key(None, low=1)                         # noam scale


@dataclass(kw_only=True)
class ExplosionConfig:
    factor: Optional[float] = key(None, low=1, low_open=True)
    patience: int = key(1, low=1)
    warmup_steps: int = key(0, low=0)


@dataclass(kw_only=True)
class TrainerConfig:
    optimizer: OptimizerConfig
    scheduler: SchedulerConfig
    max_epochs: Optional[int] = key(low=1)
    max_steps: Optional[int] = key(low=1)
    max_minutes: Optional[float] = key(None, low=0, low_open=True)   # a safety net, never the budget
    device: str = key("auto")                                         # auto | cpu | cuda | cuda:N
    num_threads: Optional[int] = key(None, low=1)
    flush_denormal: bool = key(True)
    precision: Literal["fp32", "bf16", "fp16"] = key("fp32")
    accumulate: Optional[int] = key(1, low=1)
    grad_clip: Optional[float] = key(None, low=0)
    eval_every_steps: Optional[int] = key(None, low=1)
    eval_max_batches: Optional[int] = key(None, low=1)
    early_stopping_patience: Optional[int] = key(None, low=0)
    min_epochs: Optional[int] = key(None, low=1)                      # early stopping waits for them
    log_every_steps: Optional[int] = key(None, low=1)
    progress_bar: bool = key(True)
    plot: bool = key(True)
    explosion: Optional[ExplosionConfig] = key(None)
