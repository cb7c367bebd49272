"""The generic loop on a small real task (noisy linear regression): schedules, accumulation, AMP,
early stopping, NaN guard, loggers."""
from __future__ import annotations

import math

import pytest
import torch
from conftest import compose
from omegaconf import OmegaConf
from torch import nn

from tasks.engine.base import Task
from tasks.engine.training.optim import get_lr
from tasks.engine.run_metrics import read_metrics
from tasks.engine.config.schema import typed
from tasks.engine.config.trainer_schema import SchedulerConfig
from conftest import fit_in_run


class RegressionTask(Task):
    """y = x·w* + noise; monitor = mse on a held-out split."""
    name, monitor, monitor_mode, throughput_key = "regression", "mse", "min", "nsentences"

    def __init__(self, cfg, batch_size=8, n=64, lr_scale=1.0):
        super().__init__(cfg)
        g = torch.Generator().manual_seed(0)
        w = torch.randn(5, 1, generator=g)
        self.data = {}
        for split, size in (("train", n), ("valid", 32), ("test", 32)):
            x = torch.randn(size, 5, generator=g)
            self.data[split] = (x, x @ w + 0.01 * torch.randn(size, 1, generator=g))
        self.batch_size = batch_size

    def setup(self):
        pass

    def num_batches(self, split, epoch=0, seed=0):
        return math.ceil(len(self.data[split][0]) / self.batch_size)

    def batches(self, split, epoch=0, seed=0, start=0):
        x, y = self.data[split]
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed * 1000 + epoch)) \
            if split == "train" else torch.arange(len(x))
        for i in range(start, self.num_batches(split, epoch, seed)):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            yield x[idx], y[idx]

    def build_model(self):
        torch.manual_seed(0)
        return nn.Linear(5, 1)

    def compute_loss(self, model, batch, split):
        x, y = batch
        se = ((model(x).float() - y) ** 2).sum()
        return se / len(x), {"se": se.item(), "nsentences": len(x)}

    def reduce_metrics(self, s):
        return {"loss": s["se"] / s["nsentences"], "mse": s["se"] / s["nsentences"]}


def tiny_trainer_cfg(**trainer):
    cfg = compose(["logger=none", "trainer.progress_bar=false", "trainer.plot=false", "trainer.log_every_steps=1",
                   "trainer.optimizer.name=sgd", "trainer.optimizer.lr=0.1", "trainer.optimizer.weight_decay=0"])
    for key, value in trainer.items():
        OmegaConf.update(cfg, f"trainer.{key}", value, merge=False)
    return cfg


class EpochHooksTask(RegressionTask):
    """Records the epoch hooks and the seed num_batches is asked with."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def num_batches(self, split, epoch=0, seed=0):
        if split == "train":
            self.calls.append(("num_batches", epoch, seed))
        return super().num_batches(split, epoch, seed)

    def begin_epoch(self, epoch):
        self.calls.append(("begin", epoch))

    def end_epoch(self, epoch):
        self.calls.append(("end", epoch))


@pytest.mark.slow
def test_epoch_hooks_wrap_each_training_epoch_and_num_batches_gets_the_seed(tmp_path):
    cfg = tiny_trainer_cfg(max_epochs=2, max_steps=None, eval_every_steps=None)
    cfg.seed = 7
    task = EpochHooksTask(None)
    fit_in_run(cfg, task, tmp_path)
    hooks = [c for c in task.calls if c[0] != "num_batches"]
    assert hooks == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]
    assert {c[2] for c in task.calls if c[0] == "num_batches"} == {7}


@pytest.mark.slow
def test_loss_falls_and_eval_every_epoch(tmp_path):
    result = fit_in_run(tiny_trainer_cfg(max_epochs=4, max_steps=None, eval_every_steps=None), RegressionTask(None), tmp_path)
    valid = read_metrics(tmp_path, "valid")
    assert [r["step"] for r in valid] == [8, 16, 24, 32]
    assert valid[-1]["mse"] < 0.1 * valid[0]["mse"]
    assert result.best_metric == min(r["mse"] for r in valid) and result.steps == 32


@pytest.mark.slow
def test_accumulation_equals_one_big_batch(tmp_path):
    # 2 micro-batches of 4 (mean losses / 2) give the same gradient as one batch of 8 with the same rows.
    cfg = tiny_trainer_cfg(max_steps=6, max_epochs=None, grad_clip=None)
    small = fit_in_run(OmegaConf.merge(cfg, {"trainer": {"accumulate": 2}}), RegressionTask(None, batch_size=4),
                tmp_path / "a")
    big = fit_in_run(cfg, RegressionTask(None, batch_size=8), tmp_path / "b")
    wa = torch.load(small.last_checkpoint, weights_only=True)["model"]
    wb = torch.load(big.last_checkpoint, weights_only=True)["model"]
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_early_stopping_stops(tmp_path):
    # lr 0 never improves after the first evaluation: stop after `patience` more evaluations.
    cfg = tiny_trainer_cfg(max_steps=100, max_epochs=None, eval_every_steps=2, early_stopping_patience=2)
    OmegaConf.update(cfg, "trainer.optimizer.lr", 0.0)
    result = fit_in_run(cfg, RegressionTask(None), tmp_path)
    assert result.steps == 8  # evals at 2 (best), 4, 6, 8 -> 3 without improvement > patience 2


@pytest.mark.slow
def test_min_epochs_holds_early_stopping_back(tmp_path):
    # as above, but early stopping may only end the run once 3 epochs (8 batches each) are done
    cfg = tiny_trainer_cfg(max_steps=100, max_epochs=None, eval_every_steps=2, early_stopping_patience=2, min_epochs=3)
    OmegaConf.update(cfg, "trainer.optimizer.lr", 0.0)
    result = fit_in_run(cfg, RegressionTask(None), tmp_path)
    assert result.steps == 24


@pytest.mark.slow
def test_bf16_autocast_on_cpu_trains(tmp_path):
    result = fit_in_run(tiny_trainer_cfg(max_epochs=2, max_steps=None, precision="bf16"), RegressionTask(None), tmp_path)
    assert math.isfinite(result.best_metric)


@pytest.mark.slow
def test_non_finite_loss_is_reported(tmp_path):
    cfg = tiny_trainer_cfg(max_steps=50, max_epochs=None, grad_clip=None)
    OmegaConf.update(cfg, "trainer.optimizer.lr", 1e4)
    with pytest.raises(FloatingPointError, match="lower trainer.optimizer.lr"):
        fit_in_run(cfg, RegressionTask(None), tmp_path)


@pytest.mark.slow
def test_wandb_offline_logger_writes_and_finishes(tmp_path, monkeypatch):
    import wandb
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = tiny_trainer_cfg(max_steps=4, max_epochs=None)
    cfg.logger = compose(["logger=wandb"]).logger
    fit_in_run(cfg, RegressionTask(None), tmp_path)
    assert wandb.run is None  # finish() was called
    assert list((tmp_path / "wandb").glob("offline-run-*"))


@pytest.mark.parametrize("name,step,epoch,expected", [
    ("constant", 10, 3, 1.0),
    ("step", 0, 174, 1.0),             # PTB script: constant until decay_start_epoch ...
    ("step", 0, 175, 0.98),            # ... then x0.98 per epoch
    ("step", 0, 177, 0.98 ** 3),
    ("exponential", 0, 2, 0.98 ** 2),
    ("cosine", 50, 0, 0.5),            # half way through 100 steps
    ("noam", 9, 0, 1.0),               # peak at the end of warm-up ...
    ("noam", 39, 0, 0.5),              # ... then 1/sqrt decay: (10/40)^0.5
])
def test_lr_schedules(name, step, epoch, expected):
    cfg = {"name": name, "decay": 0.98, "decay_start_epoch": 175, "min_lr": 0.0, "total_steps": None,
           "warmup_steps": 10 if name == "noam" else 0, "d_model": None}
    typed_cfg = typed(cfg, SchedulerConfig, "trainer.scheduler")  # what the trainer passes (the run config's)
    assert get_lr(step, epoch, 1.0, typed_cfg, total_steps=100) == pytest.approx(expected)


class SummedRegressionTask(RegressionTask):
    """The loss as a sum over ``sample_size`` examples (the tasks' rule for tokens, frames)."""

    def compute_loss(self, model, batch, split):
        x, y = batch
        se = ((model(x).float() - y) ** 2).sum()
        return se, {"se": se.item(), "nsentences": len(x), "sample_size": len(x)}


@pytest.mark.slow  # fit: a training run
def test_the_measured_step_is_the_trainers_step(tmp_path):
    """TrainStep (tasks/engine/training/step.py), which bench/task_throughput.py and the paper's cost columns
    run, takes the weights where the trainer takes them: micro-batches, sample-size normalisation, clipping."""
    from tasks.engine.config.checks import run_config
    from tasks.engine.training.optim import build_optimizer
    from tasks.engine.training.step import TrainStep

    cfg = tiny_trainer_cfg(max_epochs=None, max_steps=3, eval_every_steps=None, accumulate=2, grad_clip=0.05)
    fit_in_run(cfg, SummedRegressionTask(None, batch_size=4), tmp_path)
    trained = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["model"]

    task = SummedRegressionTask(None, batch_size=4)
    model = task.build_model()
    trainer = run_config(cfg).trainer
    step = TrainStep(task, model, build_optimizer(model.parameters(), trainer.optimizer), trainer, torch.device("cpu"))
    batches = list(task.batches("train", epoch=0, seed=int(cfg.seed or 0)))
    for i in range(3):
        step(batches[2 * i:2 * i + 2])
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, trained[name], rtol=0, atol=0)
