"""Training-step cost of a paper table's cells under equal conditions: every cell's model in one process,
round-robin, on its own task's first training batches.

    python -m reproduce.cell_bench --table lm_char [--scale cpu] [--steps 10] [--rounds 5] [--threads 1]

The run records (python -m reproduce) hold each cell's CPU seconds, but those were spent at different
times under different load (cells of a table often run side by side on a shared machine, and contention
for caches and memory inflates CPU time too). Here each cell's config is composed exactly as
``python train.py experiment=<cell>`` would, its task builds data, model and optimizer, ``--steps`` training
batches are taken once (``trainer.accumulate`` micro-batches per step), and then the cells alternate,
``--steps`` optimizer steps each per round (the order rotating every round), so whatever else runs on the
machine falls on all alike. A step is the trainer's own (tasks/engine/training/step.py: autocast, loss
normalised by the sample size, gradient clipping or norm, optimizer step), not a copy of it. Printed per cell: the
parameters, CPU milliseconds per step (this process's CPU time, median over rounds) and the ratio to the
cell's baseline in the table (reproduce/tables.py; median of the per-round ratios), as a Markdown table.
``--write`` also saves them to ``docs/paper/bench/<scale>/<table>.json``, where python -m reproduce.report takes
the table's cost and speed columns from (the records' CPU seconds are its fallback).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Dict, List

import torch
from reproduce.tables import TABLES, cells_at

from tasks.engine.config.checks import run_config
from tasks.engine.run.devices import machine
from tasks.engine.train.runner import check_before_work, compose
from tasks.engine.training.optim import build_optimizer
from tasks.engine.training.step import TrainStep


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m reproduce.cell_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", required=True, choices=sorted(TABLES))
    p.add_argument("--scale", default="cpu", choices=["cpu", "paper"])
    p.add_argument("--steps", type=int, default=10, help="optimizer steps per cell per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--keep-subnormals", action="store_true",
                   help="compute subnormal floats instead of flushing them as the trainer does (docs/benchmarks.md)")
    p.add_argument("--write", nargs="?", const="docs/paper/bench", default=None, metavar="ROOT",
                   help="save the numbers to ROOT/<scale>/<table>.json (default ROOT: docs/paper/bench)")
    return p.parse_args(argv)


class CellStep:
    """One cell's task, model, optimizer and first batches; ``run()`` trains ``steps`` of them."""

    def __init__(self, experiment: str, steps: int):
        cfg = compose([f"experiment={experiment}", "seed=1"])
        torch.manual_seed(1)
        self.task = check_before_work(cfg)
        self.task.setup()
        model = self.task.build_model().train()
        trainer = run_config(cfg).trainer
        cpu = torch.device("cpu")
        self.step = TrainStep(self.task, model, build_optimizer(model.parameters(), trainer.optimizer), trainer, cpu)
        n = trainer.accumulate  # micro-batches per optimizer step, as the trainer takes them
        batches = [self.task.move_to_device(b, cpu) for _, b in zip(range(steps * n), self.task.batches("train"))]
        self.steps = [batches[i:i + n] for i in range(0, len(batches), n)]
        self.parameters = sum(p.numel() for p in model.parameters())

    def run(self) -> None:
        for micro_batches in self.steps:
            self.step(micro_batches)


def main(argv=None) -> Dict[str, float]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    # Subnormal floats flushed to zero, as the trainer does (trainer.flush_denormal): without it an SRU++
    # step on lm_char slows down within a few dozen training steps at lr 5e-3 while the Transformer's does
    # not (x86 handles subnormals in microcode); the ratio would measure that, not the models.
    torch.set_flush_denormal(not args.keep_subnormals)
    table = TABLES[args.table]
    cells = cells_at(table, args.scale)
    runners = {c.name: CellStep(getattr(c, args.scale), args.steps) for c in cells}
    for r in runners.values():  # warm-up: kernels built, allocator primed
        r.run()
    times: Dict[str, List[float]] = {name: [] for name in runners}
    names = list(runners)
    for i in range(args.rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            t0 = time.process_time()
            runners[name].run()
            times[name].append((time.process_time() - t0) / args.steps)
    print(f"# {table.title}, {args.scale} cells: one training step each, CPU time, {args.threads} thread(s), "
          f"torch {torch.__version__}, {platform.machine()}; {args.rounds} rounds x {args.steps} steps, round-robin\n")
    print("| cell | parameters | CPU ms / step (median) | its baseline | baseline / cell (median of per-round ratios) |")
    print("|---|---:|---:|---|---:|")
    ratios = {}
    for cell in cells:
        base = table.baseline_of(cell) or cell
        ratios[cell.name] = statistics.median(b / t for b, t in zip(times[base.name], times[cell.name]))
        print(f"| {cell.name} | {runners[cell.name].parameters / 1e6:.2f}M | "
              f"{1000 * statistics.median(times[cell.name]):.0f} | {base.name if base is not cell else '(itself)'} | "
              f"{ratios[cell.name]:.2f}x |")
    if args.write:
        write(Path(args.write) / args.scale / f"{args.table}.json", args, runners, times, ratios)
    return ratios


def write(path: Path, args, runners: Dict[str, CellStep], times: Dict[str, List[float]],
          ratios: Dict[str, float]) -> None:
    """The measurement as python -m reproduce.report reads it: per cell, CPU ms per step and the ratio."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = {name: {"parameters": runners[name].parameters,
                    "cpu_ms_per_step": round(1000 * statistics.median(times[name]), 1),
                    "baseline_over_cell": round(ratios[name], 3)} for name in runners}
    command = (f"python -m reproduce.cell_bench --table {args.table} --scale {args.scale} --steps {args.steps} "
               f"--rounds {args.rounds} --threads {args.threads} --write")
    record = {"command": command, "table": args.table, "scale": args.scale, "steps": args.steps,
              "rounds": args.rounds, "machine": machine(), "cells": cells}
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"[bench] wrote {path}", flush=True)


if __name__ == "__main__":
    main()
