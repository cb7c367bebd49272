"""The training step, written once: the trainer runs it, and so does whatever measures it (bench/,
the paper's cost columns), so a measured "ms / step" is the step that trains.

    step = TrainStep(task, model, optimizer, trainer_cfg, device)
    summed, grad_norm = step(batches)          # one optimizer step over these micro-batches

The trainer (trainer.py) calls the parts: ``forward`` and ``backward`` per micro-batch (between them its
divergence check of the loss; around them DDP's no-sync) and ``optimizer_step`` once per step:

- forward: ``task.compute_loss`` under the run's autocast (``trainer.precision``);
- backward: with ``sample_size`` in the logging output ``loss`` is a sum, normalised in ``optimizer_step``
  by the global sum of sample sizes (fairseq's rule, tasks/engine/base.py); else ``loss / accumulate``;
- optimizer step: the learning rate set, gradients clipped (``trainer.grad_clip``; without it the norm
  is still computed: a non-finite gradient must not reach the weights), the GradScaler (fp16), the
  optimizer's step, gradients cleared.
"""
from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn

from sru.ops.precision import Precision

from tasks.engine.base import LoggingOutput, Task, sum_logging_outputs
from tasks.engine.config.trainer_schema import TrainerConfig
from tasks.engine.run import distributed
from tasks.engine.run.devices import autocast
from tasks.engine.training.optim import scale_gradients


class TrainStep:
    def __init__(self, task: Task, model: nn.Module, optimizer: torch.optim.Optimizer, trainer: TrainerConfig,
                 device: torch.device, world_size: int = 1, scaler: Optional[torch.amp.GradScaler] = None):
        self.task, self.model, self.optimizer, self.device = task, model, optimizer, device
        self.precision, self.accumulate, self.grad_clip = trainer.precision, trainer.accumulate, trainer.grad_clip
        self.world_size = world_size
        self.scales_loss = Precision(self.precision).scales_loss  # fp16: GradScaler
        self.scaler = scaler or torch.amp.GradScaler(device.type, enabled=self.scales_loss)

    def forward(self, batch: Any) -> Tuple[torch.Tensor, LoggingOutput]:
        with autocast(self.device, self.precision):
            return self.task.compute_loss(self.model, batch, "train")

    def backward(self, loss: torch.Tensor, logging_output: LoggingOutput) -> None:
        # sample_size: `loss` is a sum, normalised in optimizer_step; else a mean over this micro-batch
        self.scaler.scale(loss if "sample_size" in logging_output else loss / self.accumulate).backward()

    def optimizer_step(self, micro: Sequence[LoggingOutput], lr: Optional[float] = None,
                       check_grad_norm: Optional[Callable[[float], None]] = None
                       ) -> Tuple[LoggingOutput, Optional[float]]:
        """Normalise gradients by the global sample size, set the LR (None: keep it), clip, step.
        ``check_grad_norm``: called with the norm before the weights change (the divergence guard)."""
        summed = distributed.all_reduce_sum(sum_logging_outputs(micro))  # the global batch's sums
        if "sample_size" in summed and summed["sample_size"] > 0:
            # DDP averaged the summed gradients over ranks: x world / global sample size = sum / global size
            scale_gradients(self.model, self.world_size / summed["sample_size"])
        if lr is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        grad_norm = None
        if self.grad_clip:  # null or 0: off
            self.scaler.unscale_(self.optimizer)
            grad_norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip))
        elif not self.scales_loss:  # the norm only: a non-finite gradient must not reach the weights
            grad_norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), math.inf))
        if check_grad_norm is not None and not self.scales_loss:
            check_grad_norm(grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return summed, grad_norm

    def __call__(self, batches: Sequence[Any]) -> Tuple[LoggingOutput, Optional[float]]:
        """One optimizer step over ``batches`` (its micro-batches, already on the device)."""
        micro: List[LoggingOutput] = []
        for batch in batches:
            loss, logging_output = self.forward(batch)
            self.backward(loss, logging_output)
            micro.append(logging_output)
        return self.optimizer_step(micro)
