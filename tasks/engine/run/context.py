"""One run context per launch: everything process-wide a run needs, set up once, in one place.

    with open_run(cfg, run_dir) as ctx:           # the runner (train.py, sru-train, sweeps, python -m reproduce)
        result = fit(cfg, task, ctx)              # the trainer sets nothing up itself
        evaluate_best(task, result, ctx)          # nor does the test evaluation

evaluate.py and predict.py open it too, around building the model and using it (tasks/engine/inference/loader.py).

Entering it, in order: SIGTERM/SIGINT handlers (a stop saves last.pt at a step boundary), the process
group under torchrun (else a no-op), the run directory (rank 0's, shared with every rank), its lock
(one process owns a run dir at a time; ``lock=False`` for a folder only read from or written once,
e.g. evaluate.py's output; ``run_dir=None`` for predict.py, which writes only the files it is told),
the seed, the CPU threads, subnormal flushing, freed memory kept for reuse, and the device. Leaving it
restores the signal handlers and releases the lock (the process group is left to ``distributed.cleanup``,
which the entry point calls after the run and its failure reports).
"""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

import numpy as np
import torch

from tasks.engine.run import distributed
from tasks.engine.run.devices import pick_device
from tasks.engine.run.interrupts import StopSignals
from tasks.engine.run.lock import RunLock
from tasks.engine.run.memory import keep_freed_memory
from tasks.engine.config.checks import RunConfig, run_config
from tasks.engine.config.trainer_schema import TrainerConfig
from tasks.engine.run.threads import choose_threads


@dataclass
class RunContext:
    run_dir: Optional[Path]  # None: a command without a run directory (predict.py)
    dist: distributed.DistInfo
    device: torch.device
    stop_signals: StopSignals
    config: RunConfig  # the run's config, typed once here: the trainer, evaluation and commands read it

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes checkpoints, logs and results."""
        return distributed.is_main()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def apply_process_settings(seed: Optional[int], trainer: TrainerConfig, announce: bool = False) -> None:
    """Seed, threads, subnormal flushing and freed memory kept for reuse: the same numbers from the same config
    (its top-level ``seed`` and typed ``trainer``), in training and after."""
    if seed is not None:  # 0 is a seed too; null: unseeded
        seed_everything(int(seed))
    threads, why = choose_threads(trainer.num_threads)  # null: the cores free at start (tasks/engine/run/threads.py)
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    if announce:
        print(f"[run] {why}", flush=True)
    # far below anything that moves a weight, and ~100x slower on x86 (docs/design_notes.md#subnormal-floats)
    torch.set_flush_denormal(trainer.flush_denormal)
    if trainer.keep_freed_memory:  # process-wide, for good; false leaves malloc as it is (tasks/engine/run/memory.py)
        keep_freed_memory()


@contextlib.contextmanager
def open_run(cfg: Mapping[str, Any], run_dir: Any, lock: bool = True) -> Iterator[RunContext]:
    with contextlib.ExitStack() as stack:
        stop_signals = stack.enter_context(StopSignals())
        config = run_config(cfg)
        trainer = config.trainer
        dist_info = distributed.setup(trainer.device)  # under torchrun: join the process group
        shared_dir = None if run_dir is None else Path(distributed.broadcast_run_dir(run_dir))  # rank 0's, for all
        if lock and shared_dir is not None:
            stack.enter_context(RunLock(shared_dir, enabled=distributed.is_main()))
        apply_process_settings(config.seed, trainer, announce=distributed.is_main())
        device = dist_info.device if dist_info.enabled else pick_device(trainer.device)
        yield RunContext(run_dir=shared_dir, dist=dist_info, device=device, stop_signals=stop_signals, config=config)
