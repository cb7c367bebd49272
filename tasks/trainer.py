"""One generic training loop for every task, readable top to bottom (nanoGPT style).

    fit(cfg, task, run_dir) -> FitResult

The task supplies data, model, loss and metrics (``tasks/base.py``); this file supplies the rest:
optimizer + LR schedule, AMP, gradient clipping and accumulation, evaluation every N steps or every
epoch, early stopping, atomic ``last``/``best`` checkpoints and exact resume, progress bar, loggers
and a plot of the curves.

Exact resume: a checkpoint is written only at optimizer-step boundaries and holds model, optimizer,
GradScaler, progress (step, epoch, batch index inside the epoch), every RNG state and the task's own
state (e.g. the LM's carried hidden state). The LR is a pure function of (step, epoch). Evaluation
draws no random numbers, so a run that stops at step k and resumes is indistinguishable from one
that never stopped.
"""
from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

import torch
from torch import nn

from tasks import distributed
from tasks.base import Task, sum_logging_outputs
from tasks.checkpoint import copy_atomic, load_checkpoint, rng_state, save_atomic, set_rng_state
from tasks.loggers import build_loggers
from tasks.optim import build_optimizer, check_schedule, get_lr
from tasks.plots import plot_curves

PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass
class Progress:
    step: int = 0                 # optimizer steps done
    epoch: int = 0                # current epoch (0-based)
    batch_in_epoch: int = 0       # batches of the current epoch already consumed
    best_metric: Optional[float] = None
    best_step: int = -1
    bad_evals: int = 0            # evaluations since the last improvement (early stopping)
    last_eval_step: int = -1


@dataclass
class FitResult:
    best_metric: Optional[float]
    monitor: str
    steps: int
    run_dir: Path
    best_checkpoint: Path
    last_checkpoint: Path
    items_per_second: float       # training throughput (tokens/s or examples/s), warm-up steps excluded
    items_per_cpu_second: float   # the same per second of this process's CPU time (robust to other load)
    final_valid: Dict[str, float] = field(default_factory=dict)


def task_state_for_this_rank(ckpt: Mapping[str, Any]) -> Any:
    """This process's task state from a checkpoint (DDP checkpoints hold one per rank, e.g. LM hidden states)."""
    states = ckpt.get("task_per_rank") or [ckpt["task"]]
    world = distributed.get_world_size()
    if len(states) == world:
        return states[distributed.get_rank()]
    if any(states):
        raise ValueError(f"checkpoint holds the task state of {len(states)} process(es) but this run has {world}; "
                         f"resume with the same number of processes (torchrun --nproc_per_node={len(states)})")
    return states[0]


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"trainer.device: received {name!r} but CUDA is not available; use trainer.device=cpu or auto")
    return device


def autocast(device: torch.device, precision: str):
    if precision not in PRECISIONS:
        raise ValueError(f"trainer.precision: expected one of {list(PRECISIONS)}, received {precision!r}")
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("trainer.precision=fp16 needs CUDA (GradScaler); on CPU use trainer.precision=bf16 or fp32")
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def check_trainer_config(tcfg: Mapping[str, Any]) -> None:
    """Fail fast, before data loading, on values the loop would only reject later."""
    from tasks.optim import OPTIMIZERS
    if tcfg["precision"] not in PRECISIONS:
        raise ValueError(f"trainer.precision: expected one of {list(PRECISIONS)}, received {tcfg['precision']!r}")
    if tcfg["optimizer"]["name"] not in OPTIMIZERS:
        raise ValueError(f"trainer.optimizer.name: expected one of {list(OPTIMIZERS)}, "
                         f"received {tcfg['optimizer']['name']!r}")
    check_schedule(tcfg["scheduler"])
    if int(tcfg.get("accumulate") or 1) < 1:
        raise ValueError(f"trainer.accumulate: expected an integer >= 1, received {tcfg.get('accumulate')}")
    if tcfg.get("max_epochs") is None and tcfg.get("max_steps") is None:
        raise ValueError("trainer: expected trainer.max_epochs or trainer.max_steps to be set, received both null")


def unwrap(model: nn.Module) -> nn.Module:
    """The bare model inside a DistributedDataParallel wrapper (checkpoints store the bare one)."""
    return getattr(model, "module", model)


@torch.no_grad()
def evaluate(task: Task, model: nn.Module, split: str, device: torch.device, precision: str,
             max_batches: Optional[int] = None) -> Dict[str, float]:
    was_training = model.training
    model.eval()
    outputs = []
    for i, batch in enumerate(task.batches(split)):
        if max_batches is not None and i >= max_batches:
            break
        with autocast(device, precision):
            _, logging_output = task.compute_loss(model, task.move_to_device(batch, device), split)
        outputs.append(logging_output)
    model.train(was_training)
    # each DDP rank evaluated its shard of the split: add the sums of all ranks, then divide once
    return task.reduce_metrics(distributed.all_reduce_sum(sum_logging_outputs(outputs)))


def fit(cfg: Mapping[str, Any], task: Task, run_dir: Path, resume: bool = False,
        config_to_save: Optional[Dict[str, Any]] = None, is_main: bool = True) -> FitResult:
    tcfg = cfg["trainer"]
    run_dir = Path(run_dir)
    if is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
    ckpt_dir = run_dir / "checkpoints"
    last_path, best_path = ckpt_dir / "last.pt", ckpt_dir / "best.pt"
    dist_info = distributed.setup(tcfg["device"])  # one process per device under torchrun; else a no-op
    device = dist_info.device if dist_info.enabled else pick_device(tcfg["device"])
    is_main = is_main and distributed.is_main()  # only rank 0 writes checkpoints, logs and the progress bar
    precision = tcfg["precision"]
    check_trainer_config(tcfg)
    autocast(device, precision)  # fp16 without CUDA fails here, before any work
    accumulate = int(tcfg.get("accumulate") or 1)
    seed = cfg.get("seed") if cfg.get("seed") is not None else 0

    # ---- model, optimizer, AMP scaler --------------------------------------------------------
    model = task.build_model().to(device)
    optimizer = build_optimizer(model.parameters(), tcfg["optimizer"])
    base_lr = tcfg["optimizer"]["lr"]
    scaler = torch.amp.GradScaler(device.type, enabled=(precision == "fp16"))
    progress = Progress()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"[trainer] {type(unwrap(model)).__name__}: {n_params / 1e6:.2f}M parameters on {device}", flush=True)

    # ---- resume --------------------------------------------------------------------------------
    if resume:
        ckpt = load_checkpoint(last_path, map_location=device)
        unwrap(model).load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scaler.load_state_dict(ckpt["scaler"])
        progress = Progress(**ckpt["progress"])
        task.load_state_dict(task_state_for_this_rank(ckpt))
        set_rng_state(ckpt["rng"])
        print(f"[trainer] resumed {last_path} at step {progress.step} (epoch {progress.epoch}, "
              f"batch {progress.batch_in_epoch})", flush=True)

    model = distributed.wrap_model(model, dist_info)  # DDP when world size > 1 (after loading weights)

    # ---- plan ----------------------------------------------------------------------------------
    batches_per_epoch = task.num_batches("train")
    steps_per_epoch = math.ceil(batches_per_epoch / accumulate)
    max_epochs = tcfg.get("max_epochs")
    max_steps = tcfg.get("max_steps")
    planned = [n for n in (max_steps, max_epochs and max_epochs * steps_per_epoch) if n]
    total_steps = min(planned) if planned else 0
    max_epochs = max_epochs if max_epochs is not None else math.inf
    eval_every = tcfg.get("eval_every_steps")
    patience = tcfg.get("early_stopping_patience")
    max_seconds = tcfg["max_minutes"] * 60 if tcfg.get("max_minutes") else math.inf
    unit = "tokens" if task.throughput_key == "ntokens" else "examples"

    loggers = build_loggers(run_dir, cfg["logger"], config_to_save or {}, str(cfg.get("run_name", task.name)),
                            enabled=is_main)

    def save(metrics: Optional[Dict[str, float]], improved: bool) -> None:
        task_states = distributed.gather_to_main(task.state_dict())  # every rank takes part; rank 0 writes
        if not is_main:
            return
        payload = {
            "model": unwrap(model).state_dict(), "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(), "progress": asdict(progress), "step": progress.step,
            "rng": rng_state(), "task": task_states[0], "config": config_to_save or {},
            "monitor": task.monitor, "metrics": metrics or {},
        }
        if len(task_states) > 1:
            payload["task_per_rank"] = task_states
        save_atomic(payload, last_path)
        if improved or not best_path.exists():
            copy_atomic(last_path, best_path)

    def validate() -> Dict[str, float]:
        # the bare model: DDP's forward would sync buffers, a collective that eval shards of unequal length break
        metrics = evaluate(task, unwrap(model), "valid", device, precision, tcfg.get("eval_max_batches"))
        if task.monitor not in metrics:
            raise KeyError(f"task {task.name}: reduce_metrics returned {sorted(metrics)}, "
                           f"without its monitor {task.monitor!r}")
        value = metrics[task.monitor]
        improved = task.better(value, progress.best_metric)
        if improved:
            progress.best_metric, progress.best_step, progress.bad_evals = value, progress.step, 0
        else:
            progress.bad_evals += 1
        progress.last_eval_step = progress.step
        loggers.log({"split": "valid", "step": progress.step, "epoch": progress.epoch, **metrics,
                     f"best_{task.monitor}": progress.best_metric})
        save(metrics, improved)
        return metrics

    # ---- train ---------------------------------------------------------------------------------
    bar = None
    if is_main and tcfg.get("progress_bar", True):
        from tqdm import tqdm
        bar = tqdm(total=total_steps, initial=progress.step, desc="train", unit="step",
                   file=sys.stderr, dynamic_ncols=True, mininterval=1.0)
    window_sums: Dict[str, float] = {}
    window_start = time.time()
    train_items, train_seconds, train_cpu = 0.0, 0.0, 0.0   # throughput, excluding warm-up steps
    start_step, start_time = progress.step, time.time()
    last_metrics: Dict[str, float] = {}
    stop = progress.step >= total_steps
    try:
        model.train()
        while not stop and progress.epoch < max_epochs:
            micro, step_sums = 0, []
            step_start, step_cpu = time.time(), time.process_time()
            batches = task.batches("train", epoch=progress.epoch, seed=seed, start=progress.batch_in_epoch)
            for i, batch in enumerate(batches, start=progress.batch_in_epoch):
                batch = task.move_to_device(batch, device)
                last_micro = micro + 1 >= accumulate or i + 1 >= batches_per_epoch
                with distributed.maybe_no_sync(model, sync=last_micro):  # DDP all-reduces on the last only
                    with autocast(device, precision):
                        loss, logging_output = task.compute_loss(model, batch, "train")
                    if precision != "fp16" and not torch.isfinite(loss):
                        raise FloatingPointError(f"non-finite training loss {loss.item()} at step {progress.step}; "
                                                 f"lower trainer.optimizer.lr or set trainer.grad_clip")
                    scaler.scale(loss / accumulate).backward()
                step_sums.append(logging_output)
                micro += 1
                if micro < accumulate and i + 1 < batches_per_epoch:
                    continue  # accumulate more micro-batches before stepping

                # -- optimizer step (LR from the schedule, clip, step) --
                lr = get_lr(progress.step, progress.epoch, base_lr, tcfg["scheduler"], total_steps)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                grad_norm = None
                if tcfg.get("grad_clip"):
                    scaler.unscale_(optimizer)
                    grad_norm = float(nn.utils.clip_grad_norm_(model.parameters(), tcfg["grad_clip"]))
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                progress.step += 1
                progress.batch_in_epoch = i + 1

                # -- bookkeeping: throughput, progress bar, train metrics --
                summed = distributed.all_reduce_sum(sum_logging_outputs(step_sums))  # global batch
                micro, step_sums = 0, []
                now, now_cpu = time.time(), time.process_time()
                if progress.step - start_step > 3:  # skip warm-up steps (allocations, kernel builds)
                    train_items += summed.get(task.throughput_key, 0.0)
                    train_seconds += now - step_start
                    train_cpu += now_cpu - step_cpu
                step_start, step_cpu = now, now_cpu
                window_sums = sum_logging_outputs([window_sums, summed])
                rate = train_items / train_seconds if train_seconds > 0 else float("nan")
                if bar is not None:
                    bar.update(1)
                    shown = task.reduce_metrics(summed).get("loss", loss.item())
                    bar.set_postfix(loss=f"{shown:.3f}", lr=f"{lr:.3g}", **{f"{unit}/s": f"{rate:.0f}"},
                                    refresh=False)
                if progress.step % int(tcfg.get("log_every_steps") or 1) == 0:
                    elapsed = max(now - window_start, 1e-9)
                    record = {"split": "train", "step": progress.step, "epoch": progress.epoch, "lr": lr,
                              **task.reduce_metrics(window_sums),
                              f"{unit}_per_s": window_sums.get(task.throughput_key, 0.0) / elapsed}
                    if grad_norm is not None:
                        record["grad_norm"] = grad_norm
                    loggers.log(record)
                    window_sums, window_start = {}, time.time()

                # -- evaluation, checkpoint, stopping --
                if eval_every and progress.step % eval_every == 0:
                    last_metrics = validate()
                    step_start = window_start = time.time()  # do not count eval time as training
                    step_cpu = time.process_time()
                if progress.step >= total_steps:
                    stop = True
                elif patience is not None and progress.bad_evals > patience:
                    print(f"[trainer] early stop: {patience} evaluations without improvement", flush=True)
                    stop = True
                elif time.time() - start_time > max_seconds:
                    print(f"[trainer] stopping after trainer.max_minutes={tcfg['max_minutes']}", flush=True)
                    stop = True
                if max_seconds < math.inf:  # clocks differ between ranks: all follow rank 0's decision
                    stop = distributed.broadcast_object(stop)
                if stop:
                    break
            else:  # the epoch ran to its end
                progress.epoch += 1
                progress.batch_in_epoch = 0
                if not eval_every:
                    last_metrics = validate()
                    if patience is not None and progress.bad_evals > patience:
                        print(f"[trainer] early stop: {patience} evaluations without improvement", flush=True)
                        stop = True
                continue
            break
        # (rank 0 decides: another rank may look at the file system before rank 0's save finished)
        if distributed.broadcast_object(progress.last_eval_step != progress.step or not last_path.exists()):
            last_metrics = validate()  # the run's end always has a validation result and a `last` checkpoint
    finally:
        if bar is not None:
            bar.close()
        loggers.finish()
    if dist_info.enabled:  # DDP keeps replicas identical; never save a run whose ranks drifted apart
        diff = distributed.max_replica_difference(unwrap(model))
        print(f"[trainer] DDP: {dist_info.world_size} processes, max parameter difference between ranks {diff:.3g}")
        if diff > 1e-6:
            raise RuntimeError(f"DDP replicas diverged (max parameter difference {diff:.3g}); "
                               f"a parameter was changed outside DistributedDataParallel")
        train_cpu = distributed.all_reduce_sum({"cpu": train_cpu})["cpu"]  # items are global: CPU of all ranks
    if is_main and tcfg.get("plot", True):
        plot_curves(run_dir, task.monitor)
    rate = train_items / train_seconds if train_seconds > 0 else float("nan")
    cpu_rate = train_items / train_cpu if train_cpu > 0 else float("nan")
    best = float("nan") if progress.best_metric is None else progress.best_metric
    print(f"[trainer] done: {progress.step} steps, best valid {task.monitor} {best:.4f} "
          f"(step {progress.best_step}), train throughput {rate:,.0f} {unit}/s "
          f"({cpu_rate:,.0f} {unit} per CPU-second)", flush=True)
    return FitResult(best_metric=progress.best_metric, monitor=task.monitor, steps=progress.step,
                     run_dir=run_dir, best_checkpoint=best_path, last_checkpoint=last_path,
                     items_per_second=rate, items_per_cpu_second=cpu_rate, final_valid=last_metrics)


def evaluate_best(cfg: Mapping[str, Any], task: Task, result: FitResult, split: str = "test") -> Dict[str, float]:
    """Evaluate ``split`` with the weights of the best checkpoint."""
    dist_info = distributed.setup(cfg["trainer"]["device"])
    device = dist_info.device if dist_info.enabled else pick_device(cfg["trainer"]["device"])
    distributed.barrier()  # rank 0 has finished writing best.pt
    model = task.build_model().to(device)
    model.load_state_dict(load_checkpoint(result.best_checkpoint, map_location=device)["model"])
    return evaluate(task, model, split, device, cfg["trainer"]["precision"])
