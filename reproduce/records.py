"""The paper's run records, read: ``<records>/<scale>/<cell>/seed<s>/`` (``run.json``, ``results.json``,
``metrics_valid.csv``, written by ``python -m reproduce``) as one ``CellRecords`` per cell of a table, each
with its runs' values and validation curves on one CPU clock, and the measures reproduce/report.py puts in
its columns (CPU time to reach the baseline's best validation score, speed against the baseline).

CPU time at an evaluation = the run's CPU seconds x its step / the run's last step (steps cost alike);
``use_bench_clock`` puts a table on bench_cells' equal-conditions clock instead (step x CPU ms per step).
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

from tasks.engine.run_metrics import mean_std
from reproduce.tables import Cell, Table


class RunEnd(NamedTuple):
    kind: str                          # "early" | "budget" | "budget (too few evaluations)"
    gain_pct: Optional[float] = None   # a budget run's last-quarter gain (relative, %)


@dataclass
class Run:
    seed: int
    value: float
    extra: Optional[float]
    info: Dict
    curve: List[Dict[str, float]]          # validation rows: step, epoch, metric, cpu_s
    test: Dict = field(default_factory=dict)  # results.json's test block

    def greedy(self, table: Table) -> Tuple[Optional[float], str]:
        """``table.greedy_metric`` decoded greedily (no LM): the test's ("test"), else validation's at the
        best checkpoint on the curve the run early-stops on ("valid")."""
        key = f"greedy_{table.greedy_metric}"
        if key in self.test:
            return float(self.test[key]), "test"
        rows = [r for r in self.curve if table.validation_metric in r and table.greedy_metric in r]
        if not rows:
            return None, ""
        best = (min if table.mode == "min" else max)(rows, key=lambda r: r[table.validation_metric])
        return best[table.greedy_metric], "valid"

    @property
    def cpu_per_epoch(self) -> float:
        return self.info["cpu_s"] / max(self.info.get("epochs") or 1, 1)

    def best_valid(self, metric: str, mode: str) -> Optional[float]:
        values = [r[metric] for r in self.curve if metric in r]
        return (min if mode == "min" else max)(values) if values else None

    def plateau(self, metric: str, mode: str) -> RunEnd:
        """How the run ended: "early" (stopped by trainer.early_stopping_patience before its budget) or at its
        budget, with the relative gain of the best validation ``metric`` (the one the run early-stops on) over
        the last quarter of the evaluations."""
        budget = self.info.get("budget") or {}
        used = {"max_epochs": self.info.get("epochs") or 0, "max_steps": self.info.get("steps") or 0}
        hit_budget = any(budget.get(k) and used[k] >= budget[k] for k in used)
        if budget.get("early_stopping_patience") is not None and not hit_budget:
            return RunEnd("early")
        values = [r[metric] for r in self.curve if metric in r]
        if len(values) < 4:
            return RunEnd("budget (too few evaluations)")
        pick = min if mode == "min" else max
        before, after = pick(values[:len(values) - len(values) // 4]), pick(values)
        return RunEnd("budget", 100 * abs(after - before) / max(abs(before), 1e-12))

    def cpu_to_reach(self, target: float, metric: str, mode: str) -> Optional[float]:
        for r in self.curve:
            if metric in r and (r[metric] <= target if mode == "min" else r[metric] >= target):
                return r["cpu_s"]
        return None


@dataclass
class CellRecords:
    cell: Cell
    runs: List[Run] = field(default_factory=list)
    ms_per_step: Optional[float] = None     # CPU ms per training step at equal conditions (bench_cells)


def read_bench(bench: Optional[Path], table: Table, scale: str) -> Dict[str, float]:
    """Cell name -> CPU ms per training step from bench_cells' saved measurement ({} when there is none)."""
    path = bench / scale / f"{table.key}.json" if bench else None
    if path is None or not path.is_file():
        return {}
    return {name: float(v["cpu_ms_per_step"]) for name, v in json.loads(path.read_text())["cells"].items()}


def use_bench_clock(cells: List[CellRecords], ms_per_step: Dict[str, float]) -> None:
    """Put every curve on the equal-conditions clock (step x ms per step), but only if every measured
    cell of the table has a bench number: one table, one clock."""
    measured = [c for c in cells if c.runs and not c.cell.control]  # controls are judged on quality alone
    if not measured or any(c.cell.name not in ms_per_step for c in measured):
        return
    for c in measured:
        c.ms_per_step = ms_per_step[c.cell.name]
        for r in c.runs:
            for row in r.curve:
                row["cpu_s"] = row.get("step", 0.0) * c.ms_per_step / 1000


def cheaper_than(c: CellRecords, base: CellRecords) -> Tuple[float, str]:
    """How many times cheaper ``c`` is than ``base``, and per what: "per step" at equal conditions (both
    benched), else "per epoch" from the records."""
    if c.ms_per_step and base.ms_per_step:
        return base.ms_per_step / c.ms_per_step, "per step"
    return mean_or_nan([r.cpu_per_epoch for r in base.runs]) / mean_or_nan([r.cpu_per_epoch for r in c.runs]), "per epoch"


def metric_of(results: Dict, metric: str) -> Optional[float]:
    for block in ("test", "final_valid"):
        value = (results.get(block) or {}).get(metric)
        if value is not None:
            return float(value)
    return None


def read_curve(path: Path, cpu_s: float) -> List[Dict[str, float]]:
    with open(path, newline="") as f:
        rows = [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]
    last = max((r.get("step", 0.0) for r in rows), default=0.0) or 1.0
    for r in rows:
        r["cpu_s"] = cpu_s * r.get("step", 0.0) / last
    return rows


def collect(records: Path, table: Table, scale: str) -> List[CellRecords]:
    out = []
    for cell in table.cells:
        experiment = getattr(cell, scale)
        found = CellRecords(cell)
        root = records / scale / experiment.split("/")[-1] if experiment else None
        for seed_dir in sorted(root.glob("seed*"), key=lambda p: int(p.name[4:]) if p.name[4:].isdigit() else 0) \
                if root and root.is_dir() else []:
            if not (seed_dir / "results.json").is_file():
                continue
            results = json.loads((seed_dir / "results.json").read_text())
            info = json.loads((seed_dir / "run.json").read_text())
            value = metric_of(results, table.metric)
            if value is None:
                continue
            extra = metric_of(results, table.extra_metric) if table.extra_metric else None
            found.runs.append(Run(int(info["seed"]), value, extra, info,
                                  read_curve(seed_dir / "metrics_valid.csv", float(info["cpu_s"])),
                                  results.get("test") or {}))
        out.append(found)
    return out


def mean_or_nan(values: List[float]) -> float:
    """The mean of the values that are numbers; nan when there is none."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    return mean_std(values)[0] if values else float("nan")


def baseline_target(table: Table, base: Optional[CellRecords]) -> Optional[float]:
    """The baseline's best validation score (mean over its seeds)."""
    if base is None or not base.runs:
        return None
    best = [r.best_valid(table.validation_metric, table.mode) for r in base.runs]
    return mean_or_nan([b for b in best if b is not None])


def reach_text(c: CellRecords, table: Table, target: Optional[float]) -> str:
    if target is None or not c.runs:
        return "n/a"
    times = [r.cpu_to_reach(target, table.validation_metric, table.mode) for r in c.runs]
    reached = [t for t in times if t is not None]
    if not reached:
        return "never"
    text = f"{mean_or_nan(reached):.0f} s"
    return text if len(reached) == len(times) else f"{text} ({len(reached)}/{len(times)} seeds)"
