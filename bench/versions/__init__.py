"""Old tree against new tree, interleaved: each workload's time in the new tree over the old one, per
round, and the median over rounds.

    python -m bench.versions --old /work/main --new . --rounds 15

Two worker processes run ``bench/versions/probe.py`` (this tree's copy, run as a script), each with
PYTHONPATH set to one tree, so that ``import sru`` loads that tree's layer: fp32 training and inference,
a packed training step, int8 inference and the decode steps of SRU and SRU++, one thread, this thread's
CPU time (time descheduled by other processes is not counted: the machine may be shared). Both stay
alive, and each round asks each of them for one sample of every workload in turn (the order flipping
every round), so load that drifts over seconds falls on both alike; fresh processes one after another
differed by up to 1.8x on a loaded 2-core machine. Writes OUT/versions.json and OUT/versions.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

from bench.harness import machine_info, markdown_table

PROBE = Path(__file__).resolve().parent / "probe.py"


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="root of the old tree (holds sru/)")
    parser.add_argument("--new", default=".", help="root of the new tree (default: here)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds: one sample of each workload on each tree")
    parser.add_argument("--min-s", type=float, default=0.05, help="CPU seconds per sample of a workload")
    parser.add_argument("--workloads", default=None,
                        help="comma list of workload names to time (default: all the probe builds)")
    parser.add_argument("--out", default="outputs/bench_versions")
    args = parser.parse_args(argv)
    for tree in (args.old, args.new):
        if not (Path(tree) / "sru" / "__init__.py").is_file():
            parser.error(f"{tree}: no sru/__init__.py there; pass the root of a checkout")
    if args.rounds < 1:
        parser.error(f"--rounds: expected >= 1, received {args.rounds}")
    return args


class Worker:
    """One probe process on one tree: ``sample(name)`` is one sample's seconds per call."""

    def __init__(self, tree: str, min_s: float):
        root = str(Path(tree).resolve())
        env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
        self.tree = tree
        self.process = subprocess.Popen([sys.executable, str(PROBE), str(min_s)], env=env, cwd=root, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.calls = json.loads(self._line())

    def _line(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"bench.versions: the probe on {self.tree} exited "
                               f"(status {self.process.wait()}); its error is above")
        return line

    def sample(self, name: str) -> float:
        self.process.stdin.write(name + "\n")
        self.process.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def compare(args) -> Dict[str, Dict]:
    """Per workload: both trees' per-round seconds per call and the median of the per-round new / old ratio."""
    workers = {"old": Worker(args.old, args.min_s), "new": Worker(args.new, args.min_s)}
    names = [name for name in workers["new"].calls if name in workers["old"].calls]
    if args.workloads:
        wanted = args.workloads.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            for worker in workers.values():
                worker.close()
            raise SystemExit(f"--workloads: unknown {unknown}; expected names from {names}")
        names = [name for name in names if name in wanted]
    times = {side: {name: [] for name in names} for side in workers}
    try:
        for i in range(args.rounds):
            for name in names:
                for side in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    times[side][name].append(workers[side].sample(name))
            print(f"round {i + 1}/{args.rounds}", flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    return {name: {"old_s": times["old"][name], "new_s": times["new"][name],
                   "ratio": statistics.median(n / o for n, o in zip(times["new"][name], times["old"][name]))}
            for name in names}


def main(argv: Optional[List[str]] = None) -> Dict[str, Dict]:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = compare(args)
    info = machine_info("cpu", rounds=args.rounds, old=str(Path(args.old).resolve()),
                        new=str(Path(args.new).resolve()), load=os.getloadavg())
    cells = [[name, f"{statistics.median(r['old_s']) * 1e3:.3f}", f"{statistics.median(r['new_s']) * 1e3:.3f}",
              f"{r['ratio']:.3f}x"] for name, r in result.items()]
    table = markdown_table(["workload", "old ms", "new ms", "new / old (median of rounds)"], cells)
    (out / "versions.json").write_text(json.dumps({"machine": info, "results": result}, indent=1))
    (out / "versions.md").write_text(f"Command: `{info['command']}`  \nold {args.old}, new {args.new}, "
                                     f"{args.rounds} interleaved rounds, 1 thread, thread CPU time, load {info['load']}\n\n"
                                     f"{table}\n")
    print(table, flush=True)
    return result


if __name__ == "__main__":
    main()
