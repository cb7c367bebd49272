"""trainer.num_threads' default on a shared machine (docs/design_notes.md#threads-on-a-shared-machine).

    python -m bench.reliability.threads --rounds 2 --steps 150                      # task=lm, one core busy
    python -m bench.reliability.threads --task translation --busy 2 --steps 100     # both cores busy
    python -m bench.reliability.threads --task translation --only idle --steps 100 --rounds 3   # a quiet machine

``python train.py task=<--task>`` for its first ``--steps`` optimizer steps, in four settings, interleaved
per round (the same order each round, so slow drift of other load falls on all alike):
  busy: ``--busy`` cores held by ``python -c "while True: pass"`` loops (started before the run, stopped
        after); the default (trainer.num_threads=null) vs trainer.num_threads=1;
  idle: nothing of ours besides the run; the default vs trainer.num_threads=2.
Each run's throughput is the trainer's own (``results.json``: ``train_items_per_s``, tokens per wall-clock
second over the steps after warm-up, evaluation excluded); the thread count the default chose is read from
the run's header line. Prints a markdown table and the machine. ``--only idle`` runs only the idle pair
(no busy loops at all: "the default stays within 5% of 2 threads when idle"), ``--only busy`` only the busy
one; the load average before each run is printed, since "idle" means no other job on the machine either.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [("busy", "default", None), ("busy", "1 thread", 1), ("idle", "default", None), ("idle", "2 threads", 2)]


def chosen_settings(only=None) -> list:
    """SETTINGS, or only those of one machine state ("idle": the default vs 2 threads, no busy loops)."""
    return [s for s in SETTINGS if only in (None, s[0])]


def train(task: str, steps: int, threads, out: Path):
    args = [sys.executable, str(ROOT / "train.py"), f"task={task}", f"trainer.max_steps={steps}", "trainer.max_epochs=null",
            "test_after_training=false", "logger=none", "trainer.progress_bar=false", "trainer.plot=false",
            "trainer.eval_max_batches=1", f"trainer.num_threads={threads if threads else 'null'}",
            f"hydra.run.dir={out}"]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    header = re.search(r"\[run\] (\d+) CPU threads", done.stdout)
    return json.loads((out / "results.json").read_text())["train_items_per_s"], int(header.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--task", default="lm")
    ap.add_argument("--busy", type=int, default=1, help="busy loops in the busy setting (cores held)")
    ap.add_argument("--only", choices=["idle", "busy"], help="one pair of settings only")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1:
        ap.error(f"--rounds and --steps: expected at least 1, received {args.rounds} and {args.steps}")
    settings = chosen_settings(args.only)
    rates = {(load, name): [] for load, name, _ in settings}
    chosen = {(load, name): [] for load, name, _ in settings}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for n, (load, name, threads) in enumerate(settings):
                before = os.getloadavg()[0]
                loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                         for _ in range(args.busy if load == "busy" else 0)]
                try:
                    rate, used = train(args.task, args.steps, threads, Path(tmp) / f"r{r}_{n}")
                finally:
                    for loop in loops:
                        loop.kill()
                        loop.wait()
                rates[(load, name)].append(rate)
                chosen[(load, name)].append(used)
                print(f"round {r + 1} {load} {name}: {rate:,.0f} tokens/s ({used} threads; load average "
                      f"{before:.2f} before, {os.getloadavg()[0]:.2f} after)", flush=True)
    busy = f"busy setting: {args.busy} busy loop(s)" if args.only != "idle" else "idle setting only: no busy loops"
    print(f"\ntask={args.task}, {args.steps} steps, {busy}")
    print("| machine | setting | threads used | tokens/s (median) | per round |\n|---|---|---|---|---|")
    for load, name, _ in settings:
        per = ", ".join(f"{x:,.0f}" for x in rates[(load, name)])
        print(f"| {load} | {name} | {sorted(set(chosen[(load, name)]))} | "
              f"{statistics.median(rates[(load, name)]):,.0f} | {per} |")
    for load, a, b in (("busy", "default", "1 thread"), ("idle", "default", "2 threads")):
        if (load, a) not in rates:
            continue
        ratio = [x / y for x, y in zip(rates[(load, a)], rates[(load, b)])]
        print(f"{load}: {a} / {b} = {statistics.median(ratio):.2f} (per round {', '.join(f'{x:.2f}' for x in ratio)})")
    from tasks.engine.run.devices import cpu_model  # the one machine description

    print(f"\nCPU: {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}, "
          f"capability {torch.backends.cpu.get_cpu_capability()}")


if __name__ == "__main__":
    main()
