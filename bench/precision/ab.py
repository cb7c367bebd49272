"""Two checkouts of the layer timed against each other in one paired, interleaved run: fp32, int8 and bf16
inference of ``SRU(512, 512, num_layers=2)`` at L=64 B=32, a decode step (L=1 B=1) in each, and the fp32 and
bf16 training step, each as that checkout's commands run it. Each checkout runs in its own worker process
(``ab_worker.py``, run by path with ``PYTHONPATH`` at that checkout, so both import ``sru``); this process asks them in turn, one
candidate at a time, the order swapped every round, so that load from other processes falls on both alike.
Time is each worker's CPU time (1 thread: time spent descheduled does not count). ``--control`` adds a second
worker of the old checkout: its control/old ratio is what two processes of the same code differ by in this run
(the noise floor of new/old). Prints, per candidate, the median over rounds of new/old time and its range.

    python -m bench.precision.ab --old /work/main --rounds 16 --control
"""
import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from bench.harness import ROOT, machine_info, markdown_table

WORKER = Path(__file__).with_name("ab_worker.py")


class Worker:
    """One checkout's worker process and its line protocol."""

    def __init__(self, checkout: Path, threads: int):
        env = dict(os.environ, PYTHONPATH=str(checkout))
        self.process = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env, cwd=str(checkout))
        self.names = self.ask(f"build {threads}").split(",")

    def ask(self, line: str) -> str:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        if not answer:
            raise RuntimeError(f"the worker stopped after {line!r} (status {self.process.poll()})")
        return answer

    def seconds(self, name: str, calls: int) -> float:
        return float(self.ask(f"time {name} {calls}"))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def calls_for(worker: Worker, name: str, min_ms: float) -> int:
    """Calls per sample so that one sample takes about ``min_ms`` of CPU time."""
    per_call = worker.seconds(name, 1)
    return max(1, round(min_ms / 1e3 / max(per_call, 1e-6)))


def run(old: Path, new: Path, rounds: int, threads: int, min_ms: float, control: bool = False,
        only: Optional[Sequence[str]] = None) -> dict:
    """{side: {candidate: [side/old time of each round]}} for new (and control)."""
    workers = {"old": Worker(old, threads), "new": Worker(new, threads)}
    if control:
        workers["control"] = Worker(old, threads)
    try:
        names = [n for n in workers["new"].names if n in workers["old"].names and (not only or n in only)]
        calls = {n: calls_for(workers["old"], n, min_ms) for n in names}
        sides = list(workers)
        ratios = {side: {n: [] for n in names} for side in sides if side != "old"}
        for r in range(rounds):
            order = sides[r % len(sides):] + sides[:r % len(sides)]  # each side first, middle and last alike
            for n in names:
                took = {side: workers[side].seconds(n, calls[n]) for side in (order if r % 2 else order[::-1])}
                for side in ratios:
                    ratios[side][n].append(took[side] / took["old"])
        return ratios
    finally:
        for worker in workers.values():
            worker.close()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="the other checkout (e.g. main's)")
    parser.add_argument("--new", type=Path, default=ROOT, help="default: this checkout")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-ms", type=float, default=60.0, help="CPU time per sample")
    parser.add_argument("--control", action="store_true", help="a second worker of the old checkout beside")
    parser.add_argument("--only", help="comma-separated candidate names (default: all)")
    args = parser.parse_args(argv)
    only = args.only.split(",") if args.only else None
    ratios = run(args.old.resolve(), args.new.resolve(), args.rounds, args.threads, args.min_ms, args.control, only)
    info = machine_info()
    print(f"{info['cpu_model']}, {args.threads} thread(s), torch {info['torch']}, {args.rounds} rounds; "
          f"old {args.old}, new {args.new}; `{info['command']}`\n")
    header, rows = ["candidate"], [[n] for n in ratios["new"]]
    for side, by_name in ratios.items():
        header += [f"{side} / old time (median of rounds)", "range"]
        for row, r in zip(rows, by_name.values()):
            row += [f"{statistics.median(r):.3f}", f"{min(r):.3f}-{max(r):.3f}"]
    print(markdown_table(header, rows, "l" + "r" * (len(header) - 1)))


if __name__ == "__main__":
    main()
