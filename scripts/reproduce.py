"""Run the paper's tables: every cell of a table over N seeds, resumable, then write the report.

    python scripts/reproduce.py --scale cpu --all                    # every CPU preset, then docs/paper.md
    python scripts/reproduce.py --scale cpu --table lm --seeds 1,2,3
    python scripts/reproduce.py --scale paper --table classification --dry-run   # list the commands
    python scripts/reproduce.py ... -- trainer.device=cuda           # extra overrides for every cell

Each (cell, seed) runs ``tasks.engine.runner.run`` (exactly ``python train.py experiment=<cell> seed=<s>``) in
``<out>/<scale>/<cell experiment>/seed<s>/``. A cell whose run dir holds ``results.json`` is done and is not
rerun, so an interrupted reproduction continues where it stopped; a crash is written to ``failure.json``
in that run dir (the report lists it) and the next cell runs. Cells run table by table, seed by seed,
models interleaved, so load from other work on a shared machine hits SRU and baselines alike.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
import traceback
from pathlib import Path
from typing import List, Optional

import torch
from omegaconf import OmegaConf
from paper_tables import TABLES, cells_at

from tasks.engine.runner import compose, run


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="cpu", choices=["cpu", "paper"])
    p.add_argument("--table", action="append", choices=sorted(TABLES) + ["speed"],
                   help="a table to run (repeatable); speed = the layer benchmark of the paper's speed figure")
    p.add_argument("--all", action="store_true", help="every table")
    p.add_argument("--seeds", default="1", help="comma-separated seeds (default: 1)")
    p.add_argument("--out", default="outputs/paper", help="root of the run dirs (default: outputs/paper)")
    p.add_argument("--report", default="docs/paper.md", help="report to write at the end ('' to skip)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("overrides", nargs="*", help="Hydra overrides added to every cell (after --)")
    args = p.parse_args(argv)
    if not args.all and not args.table:
        p.error("give --table NAME (repeatable) or --all")
    return args


def run_cell(experiment: str, seed: int, run_dir: Path, overrides: List[str]) -> str:
    """Run one (cell, seed) unless it finished before; return done | ran | failed."""
    if (run_dir / "results.json").is_file():
        return "done"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "failure.json").unlink(missing_ok=True)
    cell_overrides = [f"experiment={experiment}", f"seed={seed}", *overrides]
    resume = ["resume=" + str(run_dir)] if (run_dir / "checkpoints" / "last.pt").is_file() else []
    t0 = time.time()
    earlier = json.loads((run_dir / "cell.json").read_text()).get("wall_s", 0.0) if resume else 0.0
    try:
        cfg = compose(cell_overrides + resume)
        (run_dir / "cell.json").write_text(json.dumps({
            "experiment": experiment, "seed": seed, "overrides": cell_overrides, "machine": machine(),
            "wall_s": earlier, "config": OmegaConf.to_container(cfg, resolve=False)}, indent=1))
        run(cfg, run_dir, cell_overrides + resume)
    except Exception as err:  # noqa: BLE001  one broken cell must not stop the table
        (run_dir / "failure.json").write_text(json.dumps({
            "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc(),
            "overrides": cell_overrides, "seconds": time.time() - t0}, indent=2))
        print(f"[reproduce] FAILED {experiment} seed {seed}: {type(err).__name__}: {err}", flush=True)
        return "failed"
    cell = json.loads((run_dir / "cell.json").read_text())
    cell["wall_s"] = cell.get("wall_s", 0.0) + time.time() - t0  # a resumed cell adds its earlier time
    (run_dir / "cell.json").write_text(json.dumps(cell, indent=1))
    return "ran"


def run_speed(out: Path, scale: str, dry_run: bool) -> str:
    """The paper's speed figure: SRU vs LSTM vs conv1d on its two shapes (scripts/bench_speed.py)."""
    argv = ["--shapes", "paper", "--repeats", "5" if scale == "cpu" else "20", "--out", str(out)]
    if torch.cuda.is_available():
        argv += ["--device", "cuda"]
    if dry_run:
        print("python scripts/bench_speed.py " + " ".join(argv))
        return "dry-run"
    if (out / "bench.json").is_file():
        return "done"
    import bench_speed
    bench_speed.main(argv)
    return "ran"


def machine() -> dict:
    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "threads": torch.get_num_threads(), "gpu": gpu,
            "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}


def main(argv: Optional[List[str]] = None) -> dict:
    args = parse_args(argv)
    tables = ["speed", *sorted(TABLES)] if args.all else args.table
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out) / args.scale
    status = {}
    if "speed" in tables:
        status["speed"] = run_speed(out / "speed", args.scale, args.dry_run)
    for key in [t for t in tables if t != "speed"]:
        cells = cells_at(TABLES[key], args.scale)
        for seed in seeds:
            for cell in cells:
                experiment = getattr(cell, args.scale)
                run_dir = out / experiment / f"seed{seed}"
                if args.dry_run:
                    print(f"python train.py experiment={experiment} seed={seed} {' '.join(args.overrides)} "
                          f"hydra.run.dir={run_dir}")
                    continue
                print(f"[reproduce] {key}: {cell.name} ({experiment}) seed {seed}", flush=True)
                status[f"{experiment}/seed{seed}"] = run_cell(experiment, seed, run_dir, list(args.overrides))
    if not args.dry_run:
        print(f"[reproduce] {sum(v == 'ran' for v in status.values())} ran, "
              f"{sum(v == 'done' for v in status.values())} already done, "
              f"{sum(v == 'failed' for v in status.values())} failed", flush=True)
        if args.report:
            from paper_report import main as report
            report(["--runs", str(Path(args.out)), "--out", args.report])
    return status


if __name__ == "__main__":
    main()
