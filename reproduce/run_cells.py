"""Run the paper's tables: every cell of a table over N seeds, in pieces, each finished (cell, seed) kept as
a small committed run record; then rebuild the report from the records.

    python -m reproduce --scale cpu --all                           # every CPU cell, seeds 1,2,3
    python -m reproduce --scale cpu --table lm --seeds 1,2,3 -- trainer.num_threads=1
    python -m reproduce --scale cpu --cell cpu/ptb_sru --seeds 2    # one cell (experiment or row name)
    python -m reproduce --scale paper --table classification --dry-run   # list the commands
    python -m reproduce ... --git-commit                            # git-commit each record as it lands

Each (cell, seed) runs ``tasks.engine.train.runner.run`` (exactly ``python train.py experiment=<cell> seed=<s>``) in
a scratch run dir ``<out>/<scale>/<experiment>/seed<s>/`` (checkpoints; git-ignored; an interrupted cell
resumes from its last.pt), then writes its record to ``<records>/<scale>/<cell>/seed<s>/``:

- ``config.yaml``: the composed config; ``results.json``: the run's summary (best/final valid, test);
- ``metrics_valid.csv``: the validation curve (one row per evaluation);
- ``run.json``: what ran it: command, commit, CPU, threads, torch, wall and CPU seconds, epochs, steps,
  and the recurrent layers' share of a training step (python -m reproduce.recurrent_share).

No checkpoints, no data. A (cell, seed) with a record is never rerun, so the reproduction can be run in
pieces, on different machines and days; ``python -m reproduce.report`` rebuilds docs/paper.md from the records
alone. A crash goes to ``failure.json`` in the scratch run dir (no record) and the next cell runs; a cell
another live process is training (its run dir's run.lock) is skipped as "busy", so several reproduce
processes can share a table (give them different --cell to split the work). Cells run table by table, seed
by seed, models interleaved, so load from other work hits SRU and baselines alike.
"""
from __future__ import annotations

import argparse
import csv
import json
import resource
import shutil
import subprocess
import threading
import time
import traceback
from pathlib import Path
from typing import List, Optional

import torch
from omegaconf import OmegaConf
from reproduce.tables import TABLES, cells_at

from tasks.engine.run_metrics import read_metrics
from tasks.engine.run.devices import machine
from tasks.engine.run.lock import LOCK_NAME, read_lock, stale_reason
from tasks.engine.train.runner import compose, run

ROOT = Path(__file__).resolve().parents[1]  # the checkout (reproduce/ is a top-level folder of it)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m reproduce", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="cpu", choices=["cpu", "paper"])
    p.add_argument("--table", action="append", choices=sorted(TABLES) + ["speed"],
                   help="a table to run (repeatable); speed = the layer benchmark of the paper's speed figure")
    p.add_argument("--all", action="store_true", help="every table")
    p.add_argument("--cell", action="append", default=[],
                   help="only this cell (its experiment, e.g. cpu/ptb_sru, or its row name; repeatable)")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (default: 1,2,3)")
    p.add_argument("--out", default="outputs/paper", help="root of the scratch run dirs (default: outputs/paper)")
    p.add_argument("--records", default="docs/paper/runs", help="root of the run records (default: docs/paper/runs)")
    p.add_argument("--report", default="docs/paper.md", help="report to write at the end ('' to skip)")
    p.add_argument("--git-commit", action="store_true", help="git-commit each record as it is written")
    p.add_argument("--launch-until", default=None, metavar="HH:MM",
                   help="start no new cell after this UTC time (the running one finishes); for shared machines")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("overrides", nargs="*", help="Hydra overrides added to every cell (after --)")
    args = p.parse_args(argv)
    if not args.all and not args.table and not args.cell:
        p.error("give --table NAME (repeatable), --cell EXPERIMENT or --all")
    return args


def record_dir(records: Path, scale: str, experiment: str, seed: int) -> Path:
    return records / scale / experiment.split("/")[-1] / f"seed{seed}"


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CellClock:
    """Keeps cell.json's wall_s / cpu_s current while a cell trains (every ``every`` seconds, and at the end), so
    that a cell killed mid-run and resumed later still counts its first part: at most ``every`` seconds are
    lost, and the steps redone from the last checkpoint are counted twice."""

    def __init__(self, path: Path, every: float = 30.0):
        cell = json.loads(path.read_text())
        self.path, self.every = path, every
        self.wall0, self.cpu0 = cell.get("wall_s", 0.0), cell.get("cpu_s", 0.0)
        self.t0, self.c0 = time.time(), _cpu_seconds()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def write(self) -> None:
        cell = json.loads(self.path.read_text())
        cell["wall_s"] = self.wall0 + time.time() - self.t0
        cell["cpu_s"] = self.cpu0 + _cpu_seconds() - self.c0
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(cell, indent=1))
        tmp.replace(self.path)  # atomic: a kill never leaves half a file

    def _loop(self) -> None:
        while not self.stopped.wait(self.every):
            self.write()

    def __enter__(self) -> "CellClock":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join()
        self.write()


def run_cell(experiment: str, seed: int, run_dir: Path, overrides: List[str], record: Optional[Path] = None) -> str:
    """Run one (cell, seed) unless it has a record (or, without ``record``, a results.json) or another process is
    training it: done | busy | ran | failed."""
    if (record / "results.json").is_file() if record else (run_dir / "results.json").is_file():
        return "done"
    owner = read_lock(run_dir / LOCK_NAME)
    if owner is not None and stale_reason(run_dir / LOCK_NAME, owner) is None:
        # never set aside, resume or record a run dir under a live trainer (the trainer's lock alone would
        # stop the second training, but only after this process had renamed or rewritten the dir)
        print(f"[reproduce] {experiment} seed {seed} is being trained by pid {owner.get('pid')} on "
              f"{owner.get('host')}: skipped", flush=True)
        return "busy"
    cell_overrides = [f"experiment={experiment}", f"seed={seed}", *overrides]
    t0 = time.time()
    try:
        cell_cfg = compose(cell_overrides)  # the config this cell runs under, and its record's
        set_aside_if_stale(run_dir, cell_cfg)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "failure.json").unlink(missing_ok=True)
        finished = (run_dir / "results.json").is_file()  # trained before, its record not yet written
        resume = ["resume=" + str(run_dir)] if not finished and (run_dir / "checkpoints" / "last.pt").is_file() else []
        earlier = json.loads((run_dir / "cell.json").read_text()) if (resume or finished) and (
            run_dir / "cell.json").is_file() else {}
        cfg = compose(cell_overrides + resume)
        if not finished:
            (run_dir / "cell.json").write_text(json.dumps({
                "experiment": experiment, "seed": seed, "overrides": cell_overrides,
                "machine": machine(cfg.trainer.num_threads),  # null: torch's own thread count
                "wall_s": earlier.get("wall_s", 0.0), "cpu_s": earlier.get("cpu_s", 0.0),
                "config": OmegaConf.to_container(cfg, resolve=False)}, indent=1))
            with CellClock(run_dir / "cell.json"):  # a resumed cell adds its earlier time
                run(cfg, run_dir, cell_overrides + resume)
        if record:
            write_record(record, run_dir, cell_cfg)
    except Exception as err:  # noqa: BLE001  one broken cell must not stop the table
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "failure.json").write_text(json.dumps({
            "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc(),
            "overrides": cell_overrides, "seconds": time.time() - t0}, indent=2))
        print(f"[reproduce] FAILED {experiment} seed {seed}: {type(err).__name__}: {err}", flush=True)
        return "failed"
    return "ran"


def set_aside_if_stale(run_dir: Path, cfg) -> None:
    """A scratch run dir trained under another config (a preset edited since, other overrides) must be neither
    resumed nor recorded as this cell: it is renamed ``<run_dir>.stale<N>`` (kept, not deleted) and the cell
    starts afresh. A dir without cell.json has no known config and is set aside too (one holding only an
    earlier failure.json trained nothing and is reused)."""
    if not run_dir.is_dir() or {p.name for p in run_dir.iterdir()} <= {"failure.json"}:
        return
    cell_json = run_dir / "cell.json"
    saved = json.loads(cell_json.read_text()).get("config") if cell_json.is_file() else None
    now = json.loads(json.dumps(OmegaConf.to_container(cfg, resolve=False)))  # as cell.json stores it
    if saved is not None:
        saved.pop("resume", None)
        now.pop("resume", None)
        if saved == now:
            return
    n = 1
    while run_dir.with_name(f"{run_dir.name}.stale{n}").exists():
        n += 1
    aside = run_dir.with_name(f"{run_dir.name}.stale{n}")
    run_dir.rename(aside)
    print(f"[reproduce] {run_dir} was trained under another config: moved to {aside}; starting afresh", flush=True)


def write_record(record: Path, run_dir: Path, cfg) -> None:
    """The committed evidence of one finished (cell, seed): small text files, no checkpoints, no data."""
    from reproduce.recurrent_share import measure
    cell = json.loads((run_dir / "cell.json").read_text())
    valid = read_metrics(run_dir, "valid")
    share = measure(cfg)
    tmp = record.with_name(record.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    shutil.copyfile(run_dir / "results.json", tmp / "results.json")
    keys = sorted({k for r in valid for k, v in r.items() if isinstance(v, (int, float)) and k != "split"})
    with open(tmp / "metrics_valid.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["step", "epoch"] + [k for k in keys if k not in ("step", "epoch")])
        writer.writeheader()
        writer.writerows({k: r.get(k, "") for k in writer.fieldnames} for r in valid)
    results = json.loads((run_dir / "results.json").read_text())
    (tmp / "run.json").write_text(json.dumps({
        "command": "python train.py " + " ".join(cell["overrides"]), "experiment": cell["experiment"],
        "seed": cell["seed"], "commit": git_commit(), "machine": cell["machine"],
        "wall_s": round(cell["wall_s"], 1), "cpu_s": round(cell.get("cpu_s", float("nan")), 1),
        "epochs": max((int(r.get("epoch", 0)) for r in valid), default=0), "steps": results.get("steps"),
        "budget": {k: cfg.trainer.get(k)
                   for k in ("max_epochs", "max_steps", "early_stopping_patience", "min_epochs")},
        "recurrent_share": share}, indent=1) + "\n")
    shutil.rmtree(record, ignore_errors=True)
    tmp.rename(record)  # a record appears whole or not at all
    print(f"[reproduce] record {record}", flush=True)


def git_commit() -> str:
    """HEAD, with "-dirty" when tracked code or configs differ from it (not the report and the records, which
    this command and reproduce.report rewrite while cells run)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!docs/paper.md", ":!docs/img", ":!docs/paper/runs"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def commit_record(record: Path, message: str) -> None:
    """git-commit only ``record`` (other staged work stays staged); a busy index is retried, a failure reported."""
    for attempt in range(5):
        add = subprocess.run(["git", "add", "--", str(record)], cwd=ROOT, capture_output=True, text=True)
        done = add.returncode == 0 and subprocess.run(
            ["git", "commit", "-q", "-m", message, "--only", "--", str(record)], cwd=ROOT,
            capture_output=True, text=True).returncode == 0
        if done:
            return
        time.sleep(5 * (attempt + 1))
    print(f"[reproduce] could not git-commit {record}; commit it by hand", flush=True)


def past(hhmm: Optional[str]) -> bool:
    if not hhmm:
        return False
    now = time.gmtime()
    hour, minute = (int(v) for v in hhmm.split(":"))
    return (now.tm_hour, now.tm_min) >= (hour, minute)


def run_speed(out: Path, scale: str, dry_run: bool) -> str:
    """The paper's speed figure: SRU vs LSTM vs conv1d on its two shapes (python -m bench.speed)."""
    argv = ["--shapes", "paper", "--repeats", "5" if scale == "cpu" else "20", "--out", str(out)]
    if torch.cuda.is_available():
        argv += ["--device", "cuda"]
    if dry_run:
        print("python -m bench.speed " + " ".join(argv))
        return "dry-run"
    if (out / "bench.json").is_file():
        return "done"
    from bench import speed as bench_speed
    bench_speed.main(argv)
    return "ran"


def check_cells(wanted: List[str], tables: List[str], scale: str) -> None:
    """A --cell that names no cell of the chosen tables is an error naming those that exist (not 0 runs)."""
    cells = [c for key in tables for c in cells_at(TABLES[key], scale)]
    known = {getattr(c, scale) for c in cells} | {c.name for c in cells}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"python -m reproduce: --cell {', '.join(unknown)}: no such {scale} cell in "
                         f"{', '.join(tables)}; cells: {', '.join(sorted(getattr(c, scale) for c in cells))}")


def selected(cell, wanted: List[str], scale: str) -> bool:
    return not wanted or getattr(cell, scale) in wanted or cell.name in wanted


def main(argv: Optional[List[str]] = None) -> dict:
    args = parse_args(argv)
    tables = ["speed", *sorted(TABLES)] if args.all else (args.table or sorted(TABLES))
    args.cell = [c.strip() for given in args.cell for c in given.split(",") if c.strip()]  # "--cell a,b" too
    check_cells(args.cell, [t for t in tables if t != "speed"], args.scale)
    seeds = [int(s) for s in args.seeds.split(",")]
    out, records = Path(args.out) / args.scale, Path(args.records)
    status = {}
    if "speed" in tables and not args.cell:
        status["speed"] = run_speed(out / "speed", args.scale, args.dry_run)
    for key in [t for t in tables if t != "speed"]:
        cells = [c for c in cells_at(TABLES[key], args.scale) if selected(c, args.cell, args.scale)]
        for seed in seeds:
            for cell in cells:
                experiment = getattr(cell, args.scale)
                run_dir = out / experiment / f"seed{seed}"
                record = record_dir(records, args.scale, experiment, seed)
                if args.dry_run:
                    done = " # done: record exists" if (record / "results.json").is_file() else ""
                    print(f"python train.py experiment={experiment} seed={seed} {' '.join(args.overrides)} "
                          f"hydra.run.dir={run_dir}{done}")
                    continue
                if past(args.launch_until) and not (record / "results.json").is_file():
                    print(f"[reproduce] {args.launch_until} UTC passed: not starting {experiment} seed {seed}", flush=True)
                    status[f"{experiment}/seed{seed}"] = "not started"
                    continue
                print(f"[reproduce] {key}: {cell.name} ({experiment}) seed {seed}", flush=True)
                state = run_cell(experiment, seed, run_dir, list(args.overrides), record)
                status[f"{experiment}/seed{seed}"] = state
                if state == "ran" and args.git_commit:
                    commit_record(record, f"Run record {args.scale}/{experiment.split('/')[-1]} seed {seed}")
    if not args.dry_run:
        print(f"[reproduce] {sum(v == 'ran' for v in status.values())} ran, "
              f"{sum(v == 'done' for v in status.values())} already done, "
              f"{sum(v == 'busy' for v in status.values())} busy in another process, "
              f"{sum(v == 'failed' for v in status.values())} failed", flush=True)
        if args.report:
            from reproduce.report import main as report
            report(["--records", str(records), "--out", args.report])
    return status

