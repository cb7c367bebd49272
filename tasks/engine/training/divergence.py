"""Divergence checks: nothing non-finite (or exploded) ever reaches last.pt / best.pt.

The trainer calls, in this order:
    guard.check_loss(step, loss)              each micro-batch, before backward
    guard.check_grad_norm(step, norm)         each optimizer step, before optimizer.step()
    guard.check_train_level(progress, loss)   each optimizer step: the optional explosion detector
    guard.check_valid(step, metrics, ...)     each evaluation, before the checkpoint is written
Each raises ``DivergenceError`` naming the step, the last good checkpoint and how to recover.

Why all four: SGD with a huge LR produced finite losses for a step or two while the weights went to
inf, so a NaN *validation* overwrote last.pt (and a NaN best.pt with Adam); Adam with clipping reached
a loss of 1e32, finite, so only a check against the loss's running level catches it before inf.

Explosion detector (``trainer.explosion``, off by default): after ``warmup_steps``, a step whose training
loss exceeds ``factor`` x the exponential moving average of the previous losses counts as exploding;
``patience`` such steps in a row stop the run. Exploding losses do not enter the average. Its state
lives in the trainer's Progress, so a resumed run keeps detecting from the same level.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, Optional

from tasks.engine.errors import NonFiniteError, resume_command, shell_path
from tasks.engine.config.trainer_schema import ExplosionConfig

EMA_DECAY = 0.9


class DivergenceError(NonFiniteError):
    """Training diverged (non-finite values, or an exploding loss); nothing bad was saved."""


class DivergenceGuard:
    def __init__(self, run_dir: Path, last_path: Path, best_path: Path, explosion: ExplosionConfig):
        """``explosion``: trainer.explosion, typed (conf/trainer/*.yaml); its factor null turns the check off."""
        self.run_dir, self.last_path, self.best_path = Path(run_dir), Path(last_path), Path(best_path)
        self.factor = explosion.factor
        self.patience = explosion.patience
        self.warmup = explosion.warmup_steps
        self.last_saved: Optional[int] = None       # step of the newest checkpoint written or restored
        self.best: Optional[str] = None             # "step 8, valid ppl 50.1"

    def saved(self, step: int, best_step: int, monitor: str, best_metric: Optional[float]) -> None:
        self.last_saved = step
        if best_metric is not None and best_step >= 0:
            self.best = f"step {best_step}, valid {monitor} {best_metric:.4g}"

    def error(self, what: str, step: int) -> DivergenceError:
        fix = "lower trainer.optimizer.lr and/or set trainer.grad_clip (e.g. 1.0)"
        if self.last_saved is None:
            where = "no checkpoint was written yet"
            how = f"start a new run: {fix}"
        else:
            where = f"last good checkpoint {self.last_path} (step {self.last_saved})"
            if self.best:
                where += f", best {self.best_path} ({self.best})"
            command = resume_command(self.run_dir, "trainer.optimizer.lr=<lower>", "trainer.grad_clip=1.0")
            how = (f"{fix}, and continue from the best checkpoint: cp {shell_path(self.best_path)} "
                   f"{shell_path(self.last_path)} && {command}")
        return DivergenceError(f"{what} at step {step}: stopped before saving it; {where}. To recover: {how}")

    def check_loss(self, step: int, loss: float) -> None:
        if not math.isfinite(loss):
            raise self.error(f"non-finite training loss {loss}", step)

    def check_grad_norm(self, step: int, norm: Optional[float]) -> None:
        if norm is not None and not math.isfinite(norm):
            raise self.error(f"non-finite gradient norm {norm}", step)

    def check_train_level(self, progress: Any, loss: float) -> None:
        """The explosion detector; ``progress`` carries ``loss_ema`` and ``exploding_steps``."""
        if not self.factor or not math.isfinite(loss):
            return
        ema = progress.loss_ema
        exploding = ema is not None and progress.step > self.warmup and loss > self.factor * max(ema, 1e-8)
        if exploding:
            progress.exploding_steps += 1
            if progress.exploding_steps >= self.patience:
                raise self.error(f"training loss {loss:.4g} above {self.factor:g} x its running level {ema:.4g} "
                                 f"for {progress.exploding_steps} steps (trainer.explosion)", progress.step)
            return
        progress.exploding_steps = 0
        progress.loss_ema = loss if ema is None else EMA_DECAY * ema + (1 - EMA_DECAY) * loss

    def check_valid(self, step: int, metrics: Dict[str, float], monitor: str) -> None:
        for key in dict.fromkeys((monitor, "loss")):
            value = metrics.get(key)
            if isinstance(value, float) and not math.isfinite(value):
                shown = f" (loss {metrics['loss']:.4g})" if key != "loss" and "loss" in metrics else ""
                raise self.error(f"non-finite validation {key} {value}{shown}", step)
