"""Write docs/paper.md: our numbers beside the paper's, one table per paper table, with figures.

    python scripts/paper_report.py --runs outputs/paper --out docs/paper.md

Reads the run dirs ``scripts/reproduce.py`` writes (``<runs>/<scale>/<experiment>/seed<s>/`` holding
``results.json``, ``cell.json``, ``metrics.jsonl``; a crashed run holds ``failure.json``), groups them by
experiment, and reports per cell: the paper's number, ours (mean ± std over seeds, n), the scale, the
hardware, epochs/steps, wall time, and training throughput; per table the SRU/baseline speed ratio
measured in the same run set and a plain statement of whether the paper's shape holds. A cell without
runs is listed as missing, never filled in. Figures (PNG, next to the report under img/): the speed
figure from ``<runs>/<scale>/speed/bench.json``, and per table validation curves + metric-vs-time.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from paper_tables import TABLES, Cell, Table

from tasks.engine.results import format_mean_std, mean_std, read_metrics


@dataclass
class CellRuns:
    cell: Cell
    scale: str
    values: List[float] = field(default_factory=list)
    items_per_s: List[float] = field(default_factory=list)
    wall_s: List[float] = field(default_factory=list)
    failed: List[str] = field(default_factory=list)
    run_dirs: List[Path] = field(default_factory=list)
    steps: List[int] = field(default_factory=list)
    machine: Dict = field(default_factory=dict)
    epochs: Optional[object] = None


def metric_of(results: Dict, metric: str) -> Optional[float]:
    for block in ("test", "final_valid"):
        value = (results.get(block) or {}).get(metric)
        if value is not None:
            return float(value)
    return None


def collect(runs_root: Path, table: Table, scale: str) -> List[CellRuns]:
    out = []
    for cell in table.cells:
        experiment = getattr(cell, scale)
        found = CellRuns(cell, scale)
        for run_dir in sorted((runs_root / scale / experiment).glob("seed*")) if experiment else []:
            info = json.loads((run_dir / "cell.json").read_text()) if (run_dir / "cell.json").is_file() else {}
            found.machine = info.get("machine", found.machine)
            trainer = (info.get("config") or {}).get("trainer", {})
            found.epochs = trainer.get("max_epochs") or f"{trainer.get('max_steps')} steps"
            if not (run_dir / "results.json").is_file():
                failure = run_dir / "failure.json"
                reason = json.loads(failure.read_text())["error"] if failure.is_file() else "no results.json"
                found.failed.append(f"{run_dir.name}: {reason.splitlines()[0][:120]}")
                continue
            results = json.loads((run_dir / "results.json").read_text())
            value = metric_of(results, table.metric)
            if value is None:
                found.failed.append(f"{run_dir.name}: results.json has no {table.metric}")
                continue
            found.values.append(value)
            found.items_per_s.append(float(results.get("train_items_per_s") or float("nan")))
            found.wall_s.append(float(info.get("wall_s") or float("nan")))
            found.steps.append(int(results.get("steps") or 0))
            found.run_dirs.append(run_dir)
        out.append(found)
    return out


def better_or_on_par(sru: float, base: float, mode: str, tolerance: float = 0.02) -> bool:
    """SRU at least as good as the baseline, or worse by at most ``tolerance`` of the baseline's value."""
    return sru <= base * (1 + tolerance) if mode == "min" else sru >= base * (1 - tolerance)


def shape_statement(table: Table, cells: List[CellRuns]) -> str:
    measured = [c for c in cells if c.values]
    sru = next((c for c in measured if c.cell.model in ("sru", "transformer_sru")), None)
    base = next((c for c in measured if c.cell.model == table.baseline), None)
    if sru is None or base is None:
        return f"Shape not checked: SRU and {table.baseline} cells were not both measured at this scale."
    s, b = mean_std(sru.values)[0], mean_std(base.values)[0]
    speed = mean_std(sru.items_per_s)[0] / mean_std(base.items_per_s)[0]
    quality = better_or_on_par(s, b, table.mode)
    verdict = "holds" if quality and speed > 1 else "does NOT hold"
    return (f"The paper's shape {verdict} here: {sru.cell.name} {table.metric} {s:.4g} vs {base.cell.name} {b:.4g} "
            f"({'on par (within 2%) or better' if quality else 'worse by more than 2%'}; "
            f"{'lower' if table.mode == 'min' else 'higher'} is better), training throughput SRU/{table.baseline} = {speed:.2f}x (measured in this run set).")


def markdown_table(table: Table, cells: List[CellRuns]) -> List[str]:
    lines = [f"| cell | paper | ours (mean ± std) | n | failed | scale | epochs | wall time/run | train items/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        paper = "n/a" if c.cell.reported is None else f"{c.cell.reported:g}"
        if not getattr(c.cell, c.scale):
            continue
        if not c.values and not c.failed:
            lines.append(f"| {c.cell.name} | {paper} | **missing** (not run) | 0 | 0 | {c.scale} | | | |")
            continue
        wall = mean_std(c.wall_s)[0]
        lines.append(f"| {c.cell.name} | {paper} | {format_mean_std(c.values)} | {len(c.values)} | {len(c.failed)} | "
                     f"{c.scale} | {c.epochs} | {wall / 60:.1f} min | {format_mean_std(c.items_per_s, 0)} |")
    for c in cells:
        lines += [f"- failed: {c.cell.name} {f}" for f in c.failed]
    return lines


def plot_table(table: Table, cells: List[CellRuns], path: Path) -> Optional[Path]:
    measured = [c for c in cells if c.values]
    if not measured:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curves, scatter) = plt.subplots(1, 2, figsize=(11, 4))
    for c in measured:
        records = read_metrics(c.run_dirs[0], "valid") if (c.run_dirs[0] / "metrics.jsonl").is_file() else []
        points = [(r["step"], r[table.metric]) for r in records if table.metric in r]
        if points:
            curves.plot(*zip(*points), "o-", label=c.cell.name)
        scatter.scatter([w / 60 for w in c.wall_s], c.values, label=c.cell.name)
    curves.set(xlabel="step", ylabel=f"valid {table.metric}", title="validation curves (first seed)")
    scatter.set(xlabel="wall time per run (min)", ylabel=f"test {table.metric}", title=f"{table.metric} vs time")
    for ax in (curves, scatter):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(table.title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def speed_section(bench: Path, img: Path) -> List[str]:
    if not bench.is_file():
        return ["**missing**: no speed benchmark in this run set (`scripts/reproduce.py --table speed`)."]
    data = json.loads(bench.read_text())
    lines = [f"Machine: {data['machine'].get('gpu', data['machine'].get('cpu_model'))}, "
             f"{data['machine'].get('threads')} threads; command `{data['machine'].get('command')}`.", "",
             "| shape | candidate | forward ms | train step ms | train speedup vs LSTM |", "|---|---|---|---|---|"]
    for r in data["results"]:
        if "error" in r:
            lines.append(f"| {r['shape']['label']} | {r['candidate']} | failed | | |")
            continue
        speedup = r["train_step"].get("speedup_vs_lstm")
        lines.append(f"| {r['shape']['label']} | {r['candidate']} | {r['forward']['median_ms']:.3f} | "
                     f"{r['train_step']['median_ms']:.3f} | {'' if speedup is None else f'{speedup:.2f}x'} |")
    png = bench.parent / "speed.png"
    if png.is_file():
        img.parent.mkdir(parents=True, exist_ok=True)
        img.write_bytes(png.read_bytes())
        lines += ["", f"![speed]({img.parent.name}/{img.name})"]
    lines += ["", "Paper (GTX 1070, B=32, fwd+bwd): l=32,d=256: LSTM ≈6.5 ms, conv2d ≈0.54 ms, SRU ≈0.40 ms; "
              "l=128,d=512: LSTM ≈38.9 ms, conv2d ≈4.5 ms, SRU ≈3.4 ms."]
    return lines


def main(argv=None) -> str:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default="outputs/paper")
    p.add_argument("--out", default="docs/paper.md")
    p.add_argument("--scales", default="cpu,paper")
    args = p.parse_args(argv)
    runs, out = Path(args.runs), Path(args.out)
    img = out.parent / "img"
    scales = [s for s in args.scales.split(",") if (runs / s).is_dir()] or ["cpu"]
    text = ["# The paper's tables, reproduced", "",
            f"Written by `python scripts/paper_report.py --runs {args.runs}` on {time.strftime('%Y-%m-%d %H:%M')} "
            f"from the run dirs of `scripts/reproduce.py`; scales: {', '.join(scales)}. \"paper\" = the number the "
            f"paper reports; missing cells are listed as missing.", ""]
    for scale in scales:
        text += [f"## Speed ({scale} scale)", ""] + speed_section(runs / scale / "speed" / "bench.json",
                                                                   img / f"paper_speed_{scale}.png") + [""]
        for table in TABLES.values():
            cells = collect(runs, table, scale)
            if not any(getattr(c.cell, scale) for c in cells):
                continue
            machines = {c.machine.get("cpu") for c in cells if c.machine}
            text += [f"## {table.title} — {scale} scale", "", table.note, ""] + markdown_table(table, cells)
            text += ["", f"Hardware: {', '.join(sorted(m for m in machines if m)) or 'n/a'}.", "",
                     shape_statement(table, cells), ""]
            figure = plot_table(table, cells, img / f"paper_{table.key}_{scale}.png")
            if figure:
                text += [f"![{table.key}]({img.name}/{figure.name})", ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text) + "\n")
    print(f"[report] wrote {out}", flush=True)
    return "\n".join(text)


if __name__ == "__main__":
    main()
