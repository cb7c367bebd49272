"""One generic training loop for every task, readable top to bottom (nanoGPT style).

    fit(cfg, task, ctx) -> FitResult             # ctx: tasks/engine/run/context.py (the runner opens it)

The task supplies data, model, loss and metrics (``tasks/engine/base.py``); this file supplies the rest:
optimizer + LR schedule, AMP, gradient clipping and accumulation, loss normalisation by sample size,
evaluation every N steps or every epoch, early stopping, atomic ``last``/``best`` checkpoints and exact
resume, progress bar, loggers and a plot of the curves. ``Trainer.train`` is the loop; each step of it
is a named method below it, in the order they run.

Exact resume: a checkpoint is written only at optimizer-step boundaries and holds model, optimizer,
GradScaler, progress (step, epoch, batch index inside the epoch), every RNG state and the task's own
state (e.g. a carried hidden state). The LR is a pure function of (step, epoch). Evaluation
draws no random numbers, so a run that stops at step k and resumes is indistinguishable from one
that never stopped. Failures (docs/failures.md): SIGTERM/SIGINT save last.pt after the current step
(tasks/engine/run/interrupts.py); non-finite or exploding values stop the run before any save (tasks/engine/training/divergence.py).
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import torch

from sru.ops.precision import Precision

from tasks.engine.run import distributed
from tasks.engine.base import LoggingOutput, Task, run_seed, sum_logging_outputs
from tasks.engine.training.model_size import memory_budget
from tasks.engine.training.checkpoint import (check_same_shapes, copy_atomic, load_checkpoint, rng_state, save_atomic,
                                     set_rng_state, task_state_for_this_rank)
from tasks.engine.run.devices import autocast
from tasks.engine.training.divergence import DivergenceGuard
from tasks.engine.errors import TrainingInterrupted
from tasks.engine.training.evaluation import evaluate, evaluate_checkpoint
from tasks.engine.run.context import RunContext
from tasks.engine.run.threads import watch_for
from tasks.engine.training.loggers import build_loggers, drop_records_after
from tasks.engine.training.optim import build_optimizer, get_lr, restore_optimizer_state
from tasks.engine.training.step import TrainStep
from tasks.engine.training.loggers import plot_curves
from tasks.engine.run_metrics import shown
from tasks.engine.config.trainer_schema import TrainerConfig



@dataclass
class Progress:
    step: int = 0                 # optimizer steps done
    epoch: int = 0                # current epoch (0-based)
    batch_in_epoch: int = 0       # batches of the current epoch already consumed
    best_metric: Optional[float] = None
    best_step: int = -1
    bad_evals: int = 0            # evaluations since the last improvement (early stopping)
    last_eval_step: int = -1
    loss_ema: Optional[float] = None   # explosion detector (tasks/engine/training/divergence.py): running train loss level
    exploding_steps: int = 0


@dataclass
class FitResult:
    best_metric: Optional[float]
    monitor: str
    steps: int
    run_dir: Path
    best_checkpoint: Path
    last_checkpoint: Path
    items_per_second: Optional[float]      # training throughput (tokens/s or examples/s), warm-up steps excluded
    items_per_cpu_second: Optional[float]  # the same per CPU-second of this process (None: too few steps)
    final_valid: Dict[str, float] = field(default_factory=dict)


class Trainer:
    def __init__(self, cfg: Mapping[str, Any], task: Task, ctx: RunContext, config_to_save: Optional[Dict] = None,
                 validation_callbacks: Sequence[Callable[[int, Dict[str, float], str], None]] = ()):
        self.cfg, self.task = cfg, task
        # trainer.* as one typed object, typed once by the run context; cfg itself is what the run saves
        self.trainer_cfg: TrainerConfig = ctx.config.trainer
        self.validation_callbacks = list(validation_callbacks)  # e.g. an Optuna trial's reporter; may raise
        self.run_dir = ctx.run_dir
        self.last_path = self.run_dir / "checkpoints" / "last.pt"
        self.best_path = self.run_dir / "checkpoints" / "best.pt"
        self.config_to_save = config_to_save or {}
        self.dist_info, self.device = ctx.dist, ctx.device  # set up once, by whoever opened the run
        self.is_main = distributed.is_main()  # only rank 0 writes checkpoints, logs and the progress bar
        if self.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            for stale in self.last_path.parent.glob("*.tmp"):  # a kill -9 mid-save; this process owns the dir
                stale.unlink()
        self.precision = self.trainer_cfg.precision
        autocast(self.device, self.precision)  # fp16 without CUDA fails here, before any work
        slower = Precision(self.precision).slower_than_fp32(self.device.type)  # bf16 without native bf16
        if slower and self.is_main:
            print(f"[trainer] warning: trainer.precision={self.precision} trains slower than fp32 here: {slower}; "
                  "use trainer.precision=fp32", flush=True)
        self.accumulate = self.trainer_cfg.accumulate
        self.seed = run_seed(cfg)
        self.progress = Progress()
        self.epoch_batches = math.inf  # batches in the current epoch (train_epoch sets it)
        self.unit = {"ntokens": "tokens", "nframes": "frames"}.get(task.throughput_key, "examples")
        self.train_items = self.train_seconds = self.train_cpu = 0.0  # throughput, warm-up steps excluded
        self.last_metrics: Dict[str, float] = {}
        self.stop_signals = ctx.stop_signals  # SIGTERM/SIGINT: save last.pt at a step boundary
        self.guard = DivergenceGuard(self.run_dir, self.last_path, self.best_path, self.trainer_cfg.explosion)
        self.restored_window: LoggingOutput = {}

    # ---- the loop ---------------------------------------------------------------------------------
    def train(self, resume: bool) -> FitResult:
        self.build_model_and_optimizer()
        if resume:
            self.restore_checkpoint()
        self.model = distributed.wrap_model(self.model, self.dist_info)  # DDP after loading weights
        self.train_step = TrainStep(self.task, self.model, self.optimizer, self.trainer_cfg, self.device,
                                    self.dist_info.world_size, self.scaler)
        self.plan()
        self.thread_watch = watch_for(self.trainer_cfg.num_threads) if self.device.type == "cpu" else None
        self.loggers = build_loggers(self.run_dir, self.cfg["logger"], self.config_to_save,
                                     str(self.cfg["run_name"]), enabled=self.is_main)
        self.bar = self.progress_bar()
        if self.bar is not None:  # records printed between bar redraws, not through them
            self.loggers.echo = lambda line: self.bar.write(line, file=sys.stdout)
        try:
            with self.stop_signals.deferred():
                self.model.train()
                stop = self.progress.step >= self.total_steps
                while not stop and self.progress.epoch < self.max_epochs:
                    stop = self.train_epoch()
                    self.honour_stop_request()
                # (rank 0 decides: another rank may look at the file system before rank 0's save finished)
                if distributed.broadcast_object(self.progress.last_eval_step != self.progress.step
                                                or not self.last_path.exists()):
                    self.validate()  # the run's end always has a validation result and a `last` checkpoint
                self.honour_stop_request()
        finally:
            if self.bar is not None:
                self.bar.close()
            self.loggers.finish()
        return self.finish()

    def build_model_and_optimizer(self) -> None:
        with memory_budget(self.device, self.trainer_cfg.optimizer):  # a model too large: one line, no malloc
            model = self.task.build_model()
        self.model = model.to(self.device)
        self.optimizer = build_optimizer(self.model.parameters(), self.trainer_cfg.optimizer)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=Precision(self.precision).scales_loss)
        n_params = sum(p.numel() for p in self.model.parameters())
        print(f"[trainer] {type(self.model).__name__}: {n_params / 1e6:.2f}M parameters on {self.device}", flush=True)

    def restore_checkpoint(self) -> None:
        ckpt = load_checkpoint(self.last_path, map_location=self.device)
        check_same_shapes(ckpt["model"], self.model, self.last_path)  # another size: fail, naming the keys
        self.model.load_state_dict(ckpt["model"])
        saved_optimizer = ((ckpt.get("config") or {}).get("trainer") or {}).get("optimizer") or {}
        restore_optimizer_state(self.optimizer, ckpt["optimizer"], saved_optimizer.get("name"),
                                self.trainer_cfg.optimizer.name)
        self.scaler.load_state_dict(ckpt["scaler"])
        self.progress = Progress(**ckpt["progress"])
        self.task.load_state_dict(task_state_for_this_rank(ckpt))
        set_rng_state(ckpt["rng"])
        self.restored_window = dict(ckpt.get("train_window") or {})  # a stop between two train records
        p = self.progress
        self.guard.saved(p.step, p.best_step, self.task.monitor, p.best_metric)
        if self.is_main:  # records after the checkpoint's step are repeated by this run: drop the old ones
            dropped = drop_records_after(self.run_dir, p.step)
            if dropped:
                print(f"[trainer] dropped {dropped} metric records after step {p.step} (logged after the "
                      f"checkpoint by the interrupted process)", flush=True)
        print(f"[trainer] resumed {self.last_path} at step {p.step} (epoch {p.epoch}, batch {p.batch_in_epoch})",
              flush=True)

    def plan(self) -> None:
        """Total steps for the schedule and the progress bar (epoch 0's batch count when batches vary)."""
        steps_per_epoch = math.ceil(self.task.num_batches("train", 0, self.seed) / self.accumulate)
        max_epochs, max_steps = self.trainer_cfg.max_epochs, self.trainer_cfg.max_steps
        planned = [n for n in (max_steps, max_epochs and max_epochs * steps_per_epoch) if n]
        self.total_steps = min(planned) if planned else 0
        self.max_epochs = max_epochs if max_epochs is not None else math.inf
        max_minutes = self.trainer_cfg.max_minutes
        self.max_seconds = max_minutes * 60 if max_minutes else math.inf  # null: no time limit
        self.start_step, self.start_time = self.progress.step, time.time()
        self.window_sums: LoggingOutput = self.restored_window  # train logging outputs since the last record
        self.window_start = time.time()

    def progress_bar(self):
        if not (self.is_main and self.trainer_cfg.progress_bar):
            return None
        from tqdm import tqdm
        return tqdm(total=self.total_steps, initial=self.progress.step, desc="train", unit="step",
                    file=sys.stderr, dynamic_ncols=True, mininterval=1.0)

    def train_epoch(self) -> bool:
        """Run (the rest of) the current epoch; return True when training must stop."""
        p, task = self.progress, self.task
        n_batches = self.epoch_batches = task.num_batches("train", p.epoch, self.seed)
        if p.batch_in_epoch == 0:
            task.begin_epoch(p.epoch)
        micro: List[LoggingOutput] = []
        step_start, step_cpu = time.time(), time.process_time()
        for i, batch in enumerate(task.batches("train", epoch=p.epoch, seed=self.seed, start=p.batch_in_epoch),
                                  start=p.batch_in_epoch):
            last_micro = len(micro) + 1 >= self.accumulate or i + 1 >= n_batches
            micro.append(self.forward_backward(task.move_to_device(batch, self.device), sync=last_micro))
            if not last_micro:
                continue  # accumulate more micro-batches before stepping
            summed, lr, grad_norm = self.optimizer_step(micro)
            micro = []
            p.step += 1
            self.guard.check_train_level(p, task.reduce_metrics(summed).get("loss", float("nan")))
            p.batch_in_epoch = i + 1
            now, now_cpu = time.time(), time.process_time()
            if p.step - self.start_step > 3:  # skip warm-up steps (allocations, kernel builds)
                self.train_items += summed.get(task.throughput_key, 0.0)
                self.train_seconds += now - step_start
                self.train_cpu += now_cpu - step_cpu
            self.log_train(summed, lr, grad_norm)
            self.follow_free_cores()
            every = self.trainer_cfg.eval_every_steps
            if every and p.step % every == 0:
                self.validate()
                self.window_start = time.time()  # do not count eval time as training
            if self.should_stop():
                if p.batch_in_epoch >= n_batches:  # the stop came with the epoch's last batch: count it
                    task.end_epoch(p.epoch)
                    p.epoch, p.batch_in_epoch = p.epoch + 1, 0
                return True
            self.honour_stop_request()
            step_start, step_cpu = time.time(), time.process_time()
        task.end_epoch(p.epoch)
        p.epoch += 1  # the epoch ran to its end
        p.batch_in_epoch = 0
        if not self.trainer_cfg.eval_every_steps:
            self.validate()
            return self.early_stop()
        return False

    def follow_free_cores(self) -> None:
        """A CPU run on the default thread count follows other processes' load (tasks/engine/run/threads.py):
        a team with more threads than free cores waits at every parallel region for the thread without one."""
        threads = self.thread_watch.poll() if self.thread_watch is not None else None
        if threads is not None:
            torch.set_num_threads(threads)
            print(f"[run] {threads} CPU threads from step {self.progress.step} on: the cores other processes leave "
                  f"free changed", flush=True)

    def forward_backward(self, batch: Any, sync: bool) -> LoggingOutput:
        with distributed.maybe_no_sync(self.model, sync=sync):  # DDP all-reduces on the last micro-batch only
            loss, logging_output = self.train_step.forward(batch)
            # fp16: the GradScaler skips steps with inf/NaN by design. DDP: a rank raising here alone would
            # leave the others waiting in the gradient all-reduce; the all-reduced norm check stops all of them
            if not Precision(self.precision).scales_loss and not self.dist_info.enabled:
                self.guard.check_loss(self.progress.step + 1, float(loss.detach()))
            self.train_step.backward(loss, logging_output)
        return logging_output

    def optimizer_step(self, micro: List[LoggingOutput]):
        """The schedule's LR, then the step (tasks/engine/training/step.py: normalise, clip, step)."""
        p = self.progress
        t = self.trainer_cfg
        lr = get_lr(p.step, p.epoch, t.optimizer.lr, t.scheduler, self.total_steps)
        summed, grad_norm = self.train_step.optimizer_step(
            micro, lr, check_grad_norm=lambda norm: self.guard.check_grad_norm(p.step + 1, norm))
        return summed, lr, grad_norm

    def log_train(self, summed: LoggingOutput, lr: float, grad_norm: Optional[float]) -> None:
        p, task = self.progress, self.task
        self.window_sums = sum_logging_outputs([self.window_sums, summed])
        if self.bar is not None:
            rate = self.train_items / self.train_seconds if self.train_seconds > 0 else None
            loss = task.reduce_metrics(summed).get("loss")
            self.bar.update(1)
            self.bar.set_postfix(loss=shown(loss, ".3f"), lr=f"{lr:.3g}", **{f"{self.unit}/s": shown(rate, ".0f")},
                                 refresh=False)
        if p.step % self.trainer_cfg.log_every_steps == 0:
            elapsed = max(time.time() - self.window_start, 1e-9)
            record = {"split": "train", "step": p.step, "epoch": p.epoch, "lr": lr,
                      **task.reduce_metrics(self.window_sums),
                      f"{self.unit}_per_s": self.window_sums.get(task.throughput_key, 0.0) / elapsed}
            if grad_norm is not None:
                record["grad_norm"] = grad_norm
            self.loggers.log(record)
            self.window_sums, self.window_start = {}, time.time()

    def validate(self) -> Dict[str, float]:
        p, task = self.progress, self.task
        # the bare model: DDP's forward would sync buffers, a collective that eval shards of unequal length break
        metrics = evaluate(task, distributed.unwrap_model(self.model), "valid", self.device, self.precision,
                           self.trainer_cfg.eval_max_batches, run_dir=self.run_dir)
        if task.monitor not in metrics:
            raise KeyError(f"task {task.name}: reduce_metrics returned {sorted(metrics)}, "
                           f"without its monitor {task.monitor!r}")
        self.guard.check_valid(p.step, metrics, task.monitor)  # a NaN model never reaches last.pt/best.pt
        improved = task.better(metrics[task.monitor], p.best_metric)
        if improved:
            p.best_metric, p.best_step, p.bad_evals = metrics[task.monitor], p.step, 0
        else:
            p.bad_evals += 1
        p.last_eval_step = p.step
        self.loggers.log({"split": "valid", "step": p.step, "epoch": p.epoch, **metrics,
                          f"best_{task.monitor}": p.best_metric})
        self.save(metrics, improved)
        self.last_metrics = metrics
        for callback in self.validation_callbacks:  # after the save: a callback that stops the run keeps it
            callback(p.step, metrics, task.monitor)
        return metrics

    def save(self, metrics: Optional[Dict[str, float]], improved: bool) -> None:
        task_states = distributed.gather_to_main(self.task.state_dict())  # every rank takes part; rank 0 writes
        if not self.is_main:
            return
        payload = {
            "model": distributed.unwrap_model(self.model).state_dict(), "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(), "progress": asdict(self.progress), "step": self.progress.step,
            "rng": rng_state(), "task": task_states[0], "config": self.config_to_save,
            "monitor": self.task.monitor, "metrics": metrics or {}, "train_window": dict(self.window_sums),
        }
        if len(task_states) > 1:
            payload["task_per_rank"] = task_states
        save_atomic(payload, self.last_path)
        # a stop by signal (metrics None) never writes best.pt: that checkpoint was not evaluated
        if improved or (metrics is not None and not self.best_path.exists()):
            copy_atomic(self.last_path, self.best_path)
        p = self.progress
        self.guard.saved(p.step, p.best_step, self.task.monitor, p.best_metric)

    def honour_stop_request(self) -> None:
        """After an optimizer step: on SIGTERM/SIGINT (on any rank) save last.pt and stop."""
        signum = self.stop_signals.signum or 0
        if self.dist_info.enabled:  # every rank stops at the same step: the first one any rank saw
            signum = distributed.all_reduce_max(signum)
        if not signum:
            return
        p = self.progress
        if p.last_eval_step != p.step or not self.last_path.exists():  # else validate() just saved it
            self.save(None, improved=False)
        distributed.barrier()
        raise TrainingInterrupted(int(signum), p.step, self.last_path, self.run_dir)

    def early_stop(self) -> bool:
        p, patience, floor = self.progress, self.trainer_cfg.early_stopping_patience, self.trainer_cfg.min_epochs
        epochs_done = p.epoch + (p.batch_in_epoch >= self.epoch_batches)  # mid-epoch evaluation: the last batch counts
        if patience is not None and p.bad_evals > patience and (floor is None or epochs_done >= floor):
            print(f"[trainer] early stop: {patience} evaluations without improvement", flush=True)
            return True
        return False

    def should_stop(self) -> bool:
        stop = self.progress.step >= self.total_steps or self.early_stop()
        if not stop and time.time() - self.start_time > self.max_seconds:
            print(f"[trainer] stopping after trainer.max_minutes={self.trainer_cfg.max_minutes}", flush=True)
            stop = True
        if self.max_seconds < math.inf:  # clocks differ between ranks: all follow rank 0's decision
            stop = distributed.broadcast_object(stop)
        return stop

    def finish(self) -> FitResult:
        if self.dist_info.enabled:  # DDP keeps replicas identical; never save a run whose ranks drifted apart
            diff = distributed.max_replica_difference(distributed.unwrap_model(self.model))
            print(f"[trainer] DDP: {self.dist_info.world_size} processes, max parameter difference between "
                  f"ranks {diff:.3g}")
            if diff > 1e-6:
                raise RuntimeError(f"DDP replicas diverged (max parameter difference {diff:.3g}); "
                                   f"a parameter was changed outside DistributedDataParallel")
            self.train_cpu = distributed.all_reduce_sum({"cpu": self.train_cpu})["cpu"]  # CPU of all ranks
        if self.is_main and self.trainer_cfg.plot:
            plot_curves(self.run_dir, self.task.monitor)
        p = self.progress
        # too few steps after the warm-up ones (or a resume with nothing left to do): no throughput to show
        rate = self.train_items / self.train_seconds if self.train_seconds > 0 else None
        cpu_rate = self.train_items / self.train_cpu if self.train_cpu > 0 else None
        print(f"[trainer] done: {p.step} steps, best valid {self.task.monitor} {shown(p.best_metric)} "
              f"(step {p.best_step}), train throughput {shown(rate, ',.0f')} {self.unit}/s "
              f"({shown(cpu_rate, ',.0f')} {self.unit} per CPU-second)", flush=True)
        return FitResult(best_metric=p.best_metric, monitor=self.task.monitor, steps=p.step, run_dir=self.run_dir,
                         best_checkpoint=self.best_path, last_checkpoint=self.last_path, items_per_second=rate,
                         items_per_cpu_second=cpu_rate, final_valid=self.last_metrics)


def fit(cfg: Mapping[str, Any], task: Task, ctx: RunContext, resume: bool = False,
        config_to_save: Optional[Dict[str, Any]] = None, validation_callbacks: Sequence = ()) -> FitResult:
    """Train ``task`` as ``cfg.trainer`` says, in ``ctx.run_dir`` (continuing its last checkpoint when
    ``resume``). ``ctx``: the run context its caller opened (tasks/engine/run/context.py); the config has been
    checked (tasks/engine/config/checks.py)."""
    return Trainer(cfg, task, ctx, config_to_save, validation_callbacks).train(resume)


def evaluate_best(task: Task, result: FitResult, ctx: RunContext,
                  split: str = "test") -> Dict[str, float]:
    """Evaluate ``split`` with the weights of the best checkpoint (predictions files go to the run dir)."""
    return evaluate_checkpoint(task, result.best_checkpoint, ctx, split)
