"""Collect the runs of a sweep (or of repeated seeds) into one table, and plot their validation curves.

    python -m tasks.engine.sweeps.collect outputs/multirun/2026-11-30/12-00-00_1234-ab12   # one sweep dir
    python -m tasks.engine.sweeps.collect outputs/runs/ outputs/multirun/ --out results/mine  # searched recursively
    python -m tasks.engine.sweeps.collect outputs/multirun/... --metrics valid/best_ppl test/ppl --ignore seed

A run dir is any directory holding `metrics.jsonl` (written by the trainer), `results.json` (train.py's
summary) or `failure.json` (written by train.py when a sweep job crashed). Runs are grouped into
configurations by the Hydra overrides (`.hydra/overrides.yaml`) that differ between the runs (the sweep's
parameters), minus the ignored keys (default: `seed`, so repeated seeds form one group); or by `--group-by`
config keys. Writes to --out (default: the first directory given):
  results.md / results.csv   one row per configuration: runs, failed, mean ± std (sample std) per metric
  runs.csv                   one row per run: its dir, configuration, status and final metrics
  valid_curves.png           each run's validation metrics against step, one colour per configuration

metrics.jsonl lines are JSON objects. A line with a "split" key ({"split": "valid", "step": 100, "ppl": 91.2})
is read as metrics "valid/ppl"; keys already of the form "valid/ppl" are taken as they are. A run's value of a
metric is the last one it logged, overridden by results.json where present: "valid/best_<monitor>" (the best
validation value, what sweeps optimise), "test/<metric>" (test split with the best checkpoint) and
"train/items_per_s". By default the table shows valid/best_* and test/* (all valid/* if neither exists).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tasks.engine.run_metrics import mean_std, read_jsonl

STEP_KEYS = ("step", "epoch", "time", "elapsed", "lr")
DEFAULT_IGNORE = ("seed",)


@dataclass
class Run:
    path: Path
    overrides: list[str]
    config: dict
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # metric -> [(step, value)]
    final: dict[str, float] = field(default_factory=dict)
    failed: bool = False
    error: str = ""


def flatten(tree, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1} (keys as written in Hydra overrides)."""
    out = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: tree}


def read_yaml(path: Path):
    import yaml  # PyYAML ships with hydra-core / omegaconf

    return yaml.safe_load(path.read_text()) if path.is_file() else None


def read_metrics(path: Path) -> list[dict[str, float]]:
    """metrics.jsonl -> list of flat {"split/metric": value, "step": n} records (non-numbers dropped)."""
    records = []
    for raw in read_jsonl(path):
        split = raw.get("split")
        rec = {}
        for key, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            name = key if split is None or key in STEP_KEYS or "/" in key else f"{split}/{key}"
            rec[name] = float(value)
        records.append(rec)
    return records


def load_run(run_dir: Path) -> Run:
    overrides = read_yaml(run_dir / ".hydra" / "overrides.yaml") or []
    config = flatten(read_yaml(run_dir / ".hydra" / "config.yaml") or {})
    run = Run(run_dir, [str(o) for o in overrides], config)
    metrics_file = run_dir / "metrics.jsonl"
    records = read_metrics(metrics_file) if metrics_file.is_file() else []
    for index, rec in enumerate(records):
        step = rec.get("step", float(index))
        for key, value in rec.items():
            if key in STEP_KEYS:
                continue
            run.final[key] = value
            run.curves.setdefault(key, []).append((step, value))
    summary = run_dir / "results.json"
    if summary.is_file():
        res = json.loads(summary.read_text())
        if res.get("best_valid") is not None:
            run.final[f"valid/best_{res['monitor']}"] = float(res["best_valid"])  # train.py writes both
        for key, value in (res.get("test") or {}).items():
            run.final[f"test/{key}"] = float(value)
        if res.get("train_items_per_s") is not None:
            run.final["train/items_per_s"] = float(res["train_items_per_s"])
    failure = run_dir / "failure.json"
    if failure.is_file():
        run.failed = True
        run.error = json.loads(failure.read_text()).get("error", "")
    return run


def find_runs(roots: list[Path]) -> list[Run]:
    dirs = set()
    for root in roots:
        if not root.exists():
            raise ValueError(f"run directory {root} does not exist; pass a sweep dir such as multirun/<date>/<time>")
        for marker in ("metrics.jsonl", "results.json", "failure.json"):
            dirs.update(p.parent for p in root.rglob(marker))
    return [load_run(d) for d in sorted(dirs)]


def override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def varying_keys(runs: list[Run], ignore: list[str]) -> set[str]:
    """Override keys whose value differs between runs (or that only some runs set): the sweep's parameters."""
    values: dict[str, set] = defaultdict(set)
    for run in runs:
        given = {override_key(o): o for o in run.overrides}
        for key in {override_key(o) for r in runs for o in r.overrides}:
            values[key].add(given.get(key))
    ignored = lambda k: any(k == i or k.startswith(i + ".") for i in ignore)  # noqa: E731
    return {k for k, v in values.items() if len(v) > 1 and not ignored(k)}


def configuration(run: Run, group_by: list[str], varying: set[str]) -> str:
    """The label that identifies a run's configuration (its sweep point without the seed)."""
    if group_by:
        return " ".join(f"{k}={run.config.get(k)}" for k in group_by)
    return " ".join(sorted(o for o in run.overrides if override_key(o) in varying)) or "(all runs)"


def default_metrics(runs: list[Run]) -> list[str]:
    """Best validation and test metrics (train-time metrics are noisy and per batch); else every valid/ one."""
    keys = {k for r in runs for k in r.final}
    chosen = {k for k in keys if k.startswith(("valid/best_", "test/"))}
    return sorted(chosen or {k for k in keys if k.startswith("valid/")})


def summarize(runs: list[Run], metrics: list[str], group_by: list[str], varying: set[str]) -> list[dict]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[configuration(run, group_by, varying)].append(run)
    rows = []
    for label, members in sorted(groups.items()):
        ok = [r for r in members if not r.failed]
        row = {"configuration": label, "runs": len(members), "failed": len(members) - len(ok)}
        for metric in metrics:
            row[metric] = mean_std([r.final[metric] for r in ok if metric in r.final])
        rows.append(row)
    return rows


def fmt(mean: float, std: float) -> str:
    return "n/a" if math.isnan(mean) else f"{mean:.4g} ± {std:.2g}"


def write_tables(rows: list[dict], runs: list[Run], metrics: list[str], out: Path) -> None:
    header = ["configuration", "runs", "failed", *metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["configuration"], str(row["runs"]), str(row["failed"])]
        lines.append("| " + " | ".join(cells + [fmt(*row[m]) for m in metrics]) + " |")
    failed = [r for r in runs if r.failed]
    if failed:
        lines += ["", "Failed runs:", *(f"- `{r.path}`: {r.error}" for r in failed)]
    (out / "results.md").write_text("\n".join(lines) + "\n")

    with open(out / "results.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["configuration", "runs", "failed", *(f"{m}_{s}" for m in metrics for s in ("mean", "std"))])
        for row in rows:
            writer.writerow([row["configuration"], row["runs"], row["failed"], *(v for m in metrics for v in row[m])])
    with open(out / "runs.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run_dir", "overrides", "status", *metrics])
        for run in runs:
            status = "failed" if run.failed else "ok"
            writer.writerow([run.path, " ".join(run.overrides), status, *(run.final.get(m, "") for m in metrics)])


def plot_curves(runs: list[Run], group_by: list[str], varying: set[str], out: Path) -> Path | None:
    names = sorted({k for r in runs for k, pts in r.curves.items() if k.startswith("valid/") and len(pts)})
    if not names:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display on clusters / CI
    import matplotlib.pyplot as plt

    labels = sorted({configuration(r, group_by, varying) for r in runs})
    colours = {label: plt.cm.tab10(i % 10) for i, label in enumerate(labels)}
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        seen = set()
        for run in runs:
            pts = run.curves.get(name)
            if not pts:
                continue
            label = configuration(run, group_by, varying)
            ax.plot(*zip(*pts), color=colours[label], marker=".", label=None if label in seen else label)
            seen.add(label)
        ax.set_xlabel("step")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    path = out / "valid_curves.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m tasks.engine.sweeps.collect", description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep / run directories (searched recursively)")
    parser.add_argument("--out", type=Path, help="output directory (default: the first of dirs)")
    parser.add_argument("--metrics", nargs="*", help="metrics to tabulate (default: all valid/ and test/ ones)")
    parser.add_argument("--group-by", nargs="*", default=[], help="config keys defining a configuration")
    parser.add_argument("--ignore", nargs="*", default=list(DEFAULT_IGNORE),
                        help="override keys that do not define a configuration (default: seed)")
    args = parser.parse_args(argv)

    try:
        runs = find_runs(args.dirs)
    except ValueError as err:  # a missing directory: its one line, not a traceback
        raise SystemExit(f"collect_results: error: {err}") from None
    if not runs:
        raise SystemExit(f"no runs (metrics.jsonl, results.json or failure.json) found under "
                         f"{[str(d) for d in args.dirs]}")
    metrics = args.metrics or default_metrics(runs)
    out = args.out or args.dirs[0]
    out.mkdir(parents=True, exist_ok=True)
    varying = varying_keys(runs, args.ignore)
    rows = summarize(runs, metrics, args.group_by, varying)
    write_tables(rows, runs, metrics, out)
    plot = plot_curves(runs, args.group_by, varying, out)
    print((out / "results.md").read_text())
    print(f"wrote {out / 'results.md'}, {out / 'results.csv'}, {out / 'runs.csv'}" + (f", {plot}" if plot else ""))
    return rows


if __name__ == "__main__":
    main()
