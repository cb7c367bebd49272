"""What an Optuna sweep leaves in its sweep dir, written from the study (all workers' trials):

  optimization_results.yaml  best trial: value, params, the overrides that rerun it, run dir; trial counts by
                             state and the training steps all trials spent (pruning lowers it)
  trials.csv, trials.md      every trial: number, state, value, steps, params, run dir
  optimization.png           value per trial with the best so far, and parameter importances (Optuna's fANOVA)

``read_run_dir`` is how the sweeper learns a launched trial's outcome: pruned.json, failure.json, results.json.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence

import yaml

from tasks.engine.run.interrupts import write_text_atomic  # workers sharing a sweep dir each write at their end
from tasks.engine.run_metrics import read_metrics
from tasks.engine.sweeps.study import PRUNED_FILE, trial_overrides


def read_run_dir(run_dir: Path) -> Dict[str, Any]:
    """{"state": "pruned" | "failed" | "complete" | "unknown", "steps": optimizer steps run, "error": ...}."""
    run_dir = Path(run_dir)
    if (run_dir / PRUNED_FILE).is_file():
        return {"state": "pruned", "steps": json.loads((run_dir / PRUNED_FILE).read_text())["step"]}
    if (run_dir / "failure.json").is_file():
        failure = json.loads((run_dir / "failure.json").read_text())
        return {"state": "failed", "steps": _last_train_step(run_dir), "error": failure.get("error")}
    if (run_dir / "results.json").is_file():
        return {"state": "complete", "steps": json.loads((run_dir / "results.json").read_text()).get("steps")}
    return {"state": "unknown", "steps": _last_train_step(run_dir)}


def _last_train_step(run_dir: Path):
    try:
        return max((r["step"] for r in read_metrics(run_dir, "train")), default=None)
    except (OSError, ValueError):
        return None



def trial_rows(study) -> List[Dict[str, Any]]:
    keys = sorted({k for t in study.trials for k in t.params})
    return [{"number": t.number, "state": t.state.name, "value": t.value, "steps": t.user_attrs.get("steps"),
             **{k: t.params.get(k) for k in keys}, "run_dir": t.user_attrs.get("run_dir", ""),
             "worker": t.user_attrs.get("worker", ""),
             "note": t.user_attrs.get("failure") or t.user_attrs.get("interrupted") or ""} for t in study.trials]


def _markdown(rows: Sequence[Dict[str, Any]]) -> str:
    if not rows:
        return "(no trials)\n"
    cols = list(rows[0])
    cell = lambda v: "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r[c]).replace("|", "/") for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def summary(study, fixed: Sequence[str]) -> Dict[str, Any]:
    from optuna.trial import TrialState

    counts = {s.name.lower(): sum(t.state == s for t in study.trials) for s in TrialState}
    out: Dict[str, Any] = {"name": study.study_name, "direction": study.direction.name.lower(),
                           "trials": {k: v for k, v in counts.items() if v},
                           "total_steps": sum(int(t.user_attrs.get("steps") or 0) for t in study.trials)}
    if counts["complete"]:
        best = study.best_trial
        out.update(best_trial=best.number, best_value=best.value, best_params=dict(best.params),
                   # `python train.py <best_overrides>` reruns the best trial alone (not the sweep again)
                   best_overrides=[o for o in trial_overrides(best.params, fixed)
                                   if not o.startswith("hparams_search=")],
                   best_run_dir=best.user_attrs.get("run_dir"))
    return out


def plot_study(study, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.trial import TrialState

    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == TrialState.PRUNED and t.value is not None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].plot([t.number for t in done], [t.value for t in done], "o", label="complete")
    axes[0].plot([t.number for t in pruned], [t.value for t in pruned], "x", color="gray",
                 label="pruned (last reported)")
    better = min if study.direction.name == "MINIMIZE" else max
    best, running = [], None
    for t in done:
        running = t.value if running is None else better(running, t.value)
        best.append(running)
    axes[0].step([t.number for t in done], best, where="post", color="C1", label="best so far")
    axes[0].set(xlabel="trial", ylabel="objective", title="optimisation history")
    values = [t.value for t in done + pruned]
    if values and min(values) > 0 and max(values) > 100 * min(values):
        axes[0].set_yscale("log")  # e.g. perplexities of diverged trials next to good ones
    axes[0].legend()
    try:  # needs two complete trials with different parameter values
        importances = optuna.importance.get_param_importances(study)
    except Exception:  # noqa: BLE001 - the figure's history panel is still worth writing
        importances = {}
    names = list(importances)[::-1]
    axes[1].barh(names, [importances[n] for n in names])
    axes[1].set(xlabel="importance (fANOVA)", title="parameter importance" if names else "importance: too few trials")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def write_results(study, sweep_dir: Path, fixed: Sequence[str] = ()) -> Dict[str, Any]:
    sweep_dir = Path(sweep_dir)
    info = summary(study, fixed)
    write_text_atomic(sweep_dir / "optimization_results.yaml", yaml.safe_dump(info, sort_keys=False))
    rows = trial_rows(study)
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_text_atomic(sweep_dir / "trials.csv", buffer.getvalue())
    write_text_atomic(sweep_dir / "trials.md", _markdown(rows))
    plot_study(study, sweep_dir / f".optimization.{os.getpid()}.png")
    os.replace(sweep_dir / f".optimization.{os.getpid()}.png", sweep_dir / "optimization.png")
    best, failed = info.get("best_value"), info["trials"].get("fail", 0)
    among = f" (of the complete trials only: {failed} failed)" if failed else ""
    print(f"[sweep] {info['trials']}, {info['total_steps']} training steps; best value "
          f"{'n/a' if best is None or not math.isfinite(best) else f'{best:.4f}'}{among}; results in {sweep_dir}",
          flush=True)
    return info
