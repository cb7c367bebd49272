"""Optimizers and learning-rate schedules.

The schedule is a plain function of (step, epoch) that the loop calls before every optimizer step
(nanoGPT's ``get_lr``): nothing to save, and a resumed run gets the same learning rate by construction.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import torch

from tasks.engine.config.trainer_schema import OptimizerConfig, SchedulerConfig

OPTIMIZERS = ("sgd", "adam", "adamw", "adamax", "radam")
SCHEDULES = ("constant", "step", "exponential", "noam", "cosine")


def build_optimizer(params: Iterable[torch.nn.Parameter], cfg: OptimizerConfig) -> torch.optim.Optimizer:
    """The optimizer ``cfg`` (trainer.optimizer, typed: the run config's ``trainer.optimizer``) names."""
    name, lr, wd = cfg.name, cfg.lr, cfg.weight_decay
    params = [p for p in params if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=wd)
    betas, eps = tuple(cfg.betas), cfg.eps
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    if name == "adamax":
        return torch.optim.Adamax(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    if name == "radam":  # the SRU++ paper's optimizer; its weight decay is decoupled (as AdamW)
        return torch.optim.RAdam(params, lr=lr, betas=betas, eps=eps, weight_decay=wd,
                                 decoupled_weight_decay=True)
    raise ValueError(f"trainer.optimizer.name: expected one of {list(OPTIMIZERS)}, received {name!r}")


def restore_optimizer_state(optimizer: torch.optim.Optimizer, state: Mapping[str, Any], saved_name: Any,
                            name: str) -> bool:
    """Load a checkpoint's optimizer ``state`` when it comes from the same optimizer; another one (a resume
    with trainer.optimizer.name changed) starts fresh, with a notice. Return whether the state was loaded.

    The configured hyper-parameters (betas, eps, weight_decay, momentum) win over the saved ones, so a
    resume with trainer.optimizer.weight_decay=... takes effect (the LR is set before every step)."""
    if saved_name is not None and saved_name != name:
        print(f"[trainer] resume: trainer.optimizer.name={name} differs from the checkpoint's {saved_name}: "
              f"{name} starts with a fresh state (no momentum/moment estimates carried over)", flush=True)
        return False
    configured = dict(optimizer.defaults)
    optimizer.load_state_dict(state)
    for group in optimizer.param_groups:
        group.update({k: v for k, v in configured.items() if k in group and k != "lr"})
    return True


def get_lr(step: int, epoch: int, base_lr: float, cfg: SchedulerConfig, total_steps: int | None) -> float:
    """Learning rate for optimizer step ``step`` (0-based) during ``epoch`` (0-based); ``cfg``:
    trainer.scheduler, typed (the run config's ``trainer.scheduler``)."""
    name, warmup = cfg.name, cfg.warmup_steps
    if name == "noam":  # linear warm-up then inverse square root (Vaswani et al.)
        scale = (cfg.d_model ** -0.5) if cfg.d_model else 1.0  # d_model null: lr is the peak
        s = step + 1
        if warmup > 0:
            # Normalised so that the peak (at s == warmup) equals base_lr * scale.
            return base_lr * scale * min(s ** -0.5, s * warmup ** -1.5) * warmup ** 0.5
        return base_lr * scale * s ** -0.5
    if warmup > 0 and step < warmup:
        return base_lr * (step + 1) / warmup
    if name == "constant":
        return base_lr
    if name == "step":  # the official PTB script: lr *= decay every epoch once epoch >= decay_start_epoch
        return base_lr * cfg.decay ** max(0, epoch - cfg.decay_start_epoch + 1)
    if name == "exponential":
        return base_lr * cfg.decay ** epoch
    if name == "cosine":
        horizon = cfg.total_steps if cfg.total_steps is not None else total_steps  # null: the run's planned steps
        if not horizon:
            raise ValueError("trainer.scheduler.name=cosine: expected trainer.max_steps or "
                             "trainer.scheduler.total_steps to set the horizon, received neither")
        progress = min(1.0, (step - warmup) / max(1, horizon - warmup))
        min_lr = cfg.min_lr
        return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * progress))
    raise ValueError(f"trainer.scheduler.name: expected one of {list(SCHEDULES)}, received {name!r}")


def scale_gradients(model: torch.nn.Module, factor: float) -> None:
    """Multiply every gradient by ``factor`` (the trainer's normalisation by the step's sample size)."""
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(factor)
