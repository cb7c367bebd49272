"""Run ``python -m bench.speed`` in several fresh processes and report each ratio per process and its
median over processes.

Why: on the 2-core VM we measure on, a ratio such as the small shape's inference vs the GEMM
bound is stable inside one process. From one process to the next it moves by up to ±8%
(docs/speed/layer_speed.md), more than the margins targets are
judged by. The median over fresh processes is the figure to quote; this prints it in one command.

    python -m bench.processes --processes 8 -- --device cpu --threads 2 --repeats 30 \\
        --shapes paper --candidates gemm-bound,sru-cpu

Everything after ``--`` goes to bench.speed unchanged (except ``--out``, set per process to
OUT/process_<i>). Processes run one after another, never side by side. Writes OUT/summary.md and
OUT/summary.json.
"""
import argparse
import json
import statistics
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

from bench.harness import markdown_table, module_command
RATIOS = (("forward", "vs_gemm", "inference / GEMM"), ("train_step", "vs_gemm", "training / GEMM"),
          ("forward", "speedup_vs_lstm", "inference speedup vs LSTM"),
          ("train_step", "speedup_vs_lstm", "training speedup vs LSTM"))


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=6, help="fresh bench.speed processes")
    parser.add_argument("--out", default="outputs/bench_processes")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER,
                        help="-- then the arguments of bench.speed")
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, received {args.processes}")
    args.bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    if "--out" in args.bench_args or "--decode" in args.bench_args:
        parser.error("pass --out to this script, not to bench.speed; --decode is not supported")
    return args


def collect(reports: List[dict]) -> Dict[tuple, List[float]]:
    """(shape label, dtype, candidate, ratio name) -> that ratio in each process, in run order."""
    table: Dict[tuple, List[float]] = {}
    for report in reports:
        for row in report["results"]:
            if "error" in row:
                continue
            for mode, key, name in RATIOS:
                value = row[mode].get(key)
                if value is not None:
                    table.setdefault((row["shape"]["label"], row["dtype"], row["candidate"], name),
                                     []).append(value)
    return table


def render(table: Dict[tuple, List[float]], command: str) -> str:
    rows = [[label, dtype, candidate, name, ", ".join(f"{v:.2f}" for v in values),
             f"**{statistics.median(values):.3f}**", f"{min(values):.2f}-{max(values):.2f}"]
            for (label, dtype, candidate, name), values in table.items()
            if not (candidate == "gemm-bound" and name.endswith("/ GEMM"))]  # 1.00 by definition
    header = ["shape", "dtype", "candidate", "ratio", "per process", "median", "range"]
    return f"    {command}\n\n" + markdown_table(header, rows) + "\n"


def main(argv: Optional[List[str]] = None) -> Dict[tuple, List[float]]:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    for i in range(args.processes):
        run_out = out / f"process_{i}"
        cmd, env = module_command("bench.speed", *args.bench_args, "--out", str(run_out))
        print(f"[process {i + 1}/{args.processes}] {' '.join(cmd[1:])}", flush=True)
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"bench.speed failed in process {i + 1} (exit {done.returncode}):\n"
                             + done.stdout[-2000:] + done.stderr[-4000:])
        reports.append(json.loads((run_out / "bench.json").read_text()))
    table = collect(reports)
    command = " ".join(["python -m bench.processes", "--processes", str(args.processes), "--",
                        *args.bench_args])
    text = render(table, command)
    (out / "summary.md").write_text(text)
    (out / "summary.json").write_text(json.dumps(
        {"command": command, "machine": reports[0]["machine"],
         "ratios": [{"shape": k[0], "dtype": k[1], "candidate": k[2], "ratio": k[3], "per_process": v,
                     "median": statistics.median(v)} for k, v in table.items()]}, indent=1))
    print(text + f"wrote {out / 'summary.md'}, {out / 'summary.json'}", flush=True)
    return table


if __name__ == "__main__":
    main()
