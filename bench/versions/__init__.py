"""Old tree against new tree, in alternating fresh processes: each workload's time in the new tree over the
old one, per round, and the median over rounds.

    python -m bench.versions --old /work/main --new . --rounds 4

Each process is ``bench/versions/probe.py`` (this tree's copy, run as a script) with PYTHONPATH set to one
tree, so that ``import sru`` loads that tree's layer: fp32 training and inference, a packed training
step, int8 inference and the decode steps of SRU and SRU++, one thread, this thread's CPU time (time
descheduled by other processes is not counted: the machine may be shared). Rounds alternate which tree
runs first. Writes OUT/versions.json and OUT/versions.md.
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
    parser.add_argument("--rounds", type=int, default=4, help="pairs of processes (old, new)")
    parser.add_argument("--min-s", type=float, default=0.2, help="CPU seconds per sample of a workload")
    parser.add_argument("--out", default="outputs/bench_versions")
    args = parser.parse_args(argv)
    for tree in (args.old, args.new):
        if not (Path(tree) / "sru" / "__init__.py").is_file():
            parser.error(f"{tree}: no sru/__init__.py there; pass the root of a checkout")
    if args.rounds < 1:
        parser.error(f"--rounds: expected >= 1, received {args.rounds}")
    return args


def probe(tree: str, min_s: float) -> Dict[str, float]:
    """Seconds per call of every workload, measured in a fresh process on ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(PROBE), str(min_s)], env=env, capture_output=True,
                          text=True, check=False, cwd=str(Path(tree).resolve()))
    if done.returncode != 0:
        raise RuntimeError(f"bench.versions: the probe failed on {tree}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(args) -> Dict[str, Dict]:
    """Per workload: both trees' per-round times and the median of the per-round new / old ratio."""
    rounds = []
    for i in range(args.rounds):
        order = [("old", args.old), ("new", args.new)][:: 1 if i % 2 == 0 else -1]
        times = {side: probe(tree, args.min_s) for side, tree in order}
        print(f"round {i + 1}: " + ", ".join(f"{k} {times['new'][k] / times['old'][k]:.3f}"
                                              for k in times["new"] if k != "sru"), flush=True)
        rounds.append(times)
    names = [k for k in rounds[0]["new"] if k != "sru"]
    return {name: {"old_s": [r["old"][name] for r in rounds], "new_s": [r["new"][name] for r in rounds],
                   "ratio": statistics.median(r["new"][name] / r["old"][name] for r in rounds)}
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
                                     f"{args.rounds} rounds, 1 thread, thread CPU time, load {info['load']}\n\n"
                                     f"{table}\n")
    print(table, flush=True)
    return result


if __name__ == "__main__":
    main()
