"""The recurrent layers' share of a training step's CPU time, measured on a run's own batches.

    PYTHONPATH=$PWD python -m reproduce.recurrent_share experiment=cpu/ptb_sru [--batches 8]

Builds the task and model of the composed config (fresh weights: the cost of a step does not depend on
them), then for each of ``--batches`` training batches times, in CPU seconds of this process (all threads;
robust to other load on the machine):

- the training step's forward and backward, the trainer's own (tasks/engine/training/step.py: autocast,
  the loss normalised by the sample size); the optimizer step, the same whatever the encoder, is left out;
- every recurrent encoder call of that step (SRU / SRU++ / LSTM modules, caught by a forward pre-hook with its
  exact inputs) replayed alone: forward + backward of its outputs, its input requiring grad exactly when
  it did in the step.

share = recurrent / full (the paper's "time used in RNN" over the time per step). ``python -m reproduce``
stores it in each run record.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Dict, List

import torch
from torch import nn

from tasks.common.encoders import recurrent_modules
from tasks.engine.config.checks import run_config
from tasks.engine.train.runner import check_before_work, compose
from tasks.engine.training.optim import build_optimizer
from tasks.engine.training.step import TrainStep


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


def _outputs_sum(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out.float().sum() if out.requires_grad else out.new_zeros(())
    if isinstance(out, (list, tuple)):
        return sum((_outputs_sum(o) for o in out), torch.zeros(()))
    return torch.zeros(())


def _train_batches(task, seed: int, n: int):
    """The first ``n`` training batches, over more than one epoch when an epoch has fewer."""
    count = 0
    for epoch in range(max(n, 1)):
        for batch in task.batches("train", epoch=epoch, seed=seed):
            if count >= n:
                return
            count += 1
            yield batch
        if count == 0:
            return  # no training batches at all


def _cpu() -> float:
    return time.process_time()


def measure(cfg, batches: int = 8, warmup: int = 2) -> Dict[str, float]:
    if cfg.trainer.get("num_threads"):
        torch.set_num_threads(int(cfg.trainer.num_threads))
    if cfg.seed is not None:
        torch.manual_seed(int(cfg.seed))
    task = check_before_work(cfg)
    task.setup()
    model: nn.Module = task.build_model().train()
    trainer = run_config(cfg).trainer
    train_step = TrainStep(task, model, build_optimizer(model.parameters(), trainer.optimizer), trainer,
                           torch.device("cpu"))
    encoders = recurrent_modules(model)
    if not encoders:
        return {"share": float("nan"), "note": "no SRU/LSTM encoder in this model"}
    calls: List[tuple] = []
    hooks = [enc.register_forward_pre_hook(lambda m, a, k: calls.append((m, _clone(a), _clone(k))), with_kwargs=True)
             for enc in encoders]
    full = recurrent = 0.0
    counted = 0
    try:
        for i, batch in enumerate(_train_batches(task, int(cfg.seed or 0), warmup + batches)):
            calls.clear()
            model.zero_grad(set_to_none=True)
            t0 = _cpu()
            loss, logging_output = train_step.forward(task.move_to_device(batch, torch.device("cpu")))
            train_step.backward(loss, logging_output)
            step = _cpu() - t0
            replay = list(calls)
            for h in hooks:  # the replays must not record themselves
                h.remove()
            t0 = _cpu()
            for module, args, kwargs in replay:
                out = module(*args, **kwargs)
                total = _outputs_sum(out)
                if total.requires_grad:
                    total.backward()
            rnn = _cpu() - t0
            hooks = [enc.register_forward_pre_hook(
                lambda m, a, k: calls.append((m, _clone(a), _clone(k))), with_kwargs=True) for enc in encoders]
            if i >= warmup:
                full, recurrent, counted = full + step, recurrent + rnn, counted + 1
    finally:
        for h in hooks:
            h.remove()
    return {"share": recurrent / full if full > 0 else float("nan"), "recurrent_cpu_s_per_step": recurrent / max(counted, 1),
            "step_cpu_s": full / max(counted, 1), "batches": counted}


def main(argv=None) -> Dict[str, float]:
    argv = list(sys.argv[1:] if argv is None else argv)
    batches = 8
    if "--batches" in argv:
        i = argv.index("--batches")
        batches = int(argv[i + 1])
        del argv[i:i + 2]
    result = measure(compose(argv), batches=batches)
    print(result)
    return result


if __name__ == "__main__":
    main()
