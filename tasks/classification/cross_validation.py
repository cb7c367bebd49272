"""k-fold cross-validation for the classification task: run train.py's pipeline once per fold and report
test accuracy / macro-F1 mean ± std and training time per epoch.

    python -m tasks.classification.cross_validation experiment=paper/classification_mr_sru                 # all 10 folds
    python -m tasks.classification.cross_validation --folds 3 --models sru,lstm,cnn \\
        experiment=paper/classification_mr_{model} trainer.max_epochs=4              # compare models

Arguments after the options are Hydra overrides exactly as for train.py; ``{model}`` in them is replaced
by each name of ``--models``. Runs are interleaved (fold by fold, every model within a fold) so CPU load
from other work hits all models alike. Each run writes its own run directory under ``--out``; the
summary goes to ``<out>/cv_summary.json`` and ``<out>/cv_summary.md``. Rerunning the same command resumes:
runs whose ``results.json`` holds test metrics are read back instead of rerun. Sets that ship their own test split
(TREC, SST, ...) have no folds: they run once.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Dict, List

from tasks.engine.run_metrics import format_mean_std as mean_std
from tasks.engine.train.runner import compose, run


def _span(values) -> str:
    """'min-max (mean m)' of the known values, '-' when none is known."""
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    return f"{min(known)}-{max(known)} (mean {sum(known) / len(known):.1f})"


def summarize(runs: List[Dict], out: Path, argv=None, final: bool = True) -> Dict:
    """Write cv_summary.json / .md for the runs so far (called after every run, so an interrupted
    cross-validation still leaves a summary of its finished folds)."""
    rows = []
    for label in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == label]
        rows.append({"model": label, "folds": [r["fold"] for r in mine],
                     "test_accuracy": mean_std([r["test_accuracy"] for r in mine]),
                     "test_macro_f1": mean_std([r["test_macro_f1"] for r in mine]),
                     "best_valid_accuracy": mean_std([r["best_valid_accuracy"] for r in mine]),
                     "sec_per_epoch": mean_std([r["sec_per_epoch"] for r in mine]),
                     "epochs_run": _span([r.get("epochs_run") for r in mine]),
                     "best_epoch": _span([r.get("best_epoch") for r in mine])})
    table = ["| model | folds | test accuracy (%) | test macro-F1 (%) | valid accuracy (%) | train s/epoch "
             "| epochs run | best epoch |", "|---|---|---|---|---|---|---|---|"]
    table += [f"| {r['model']} | {len(r['folds'])} ({','.join(map(str, r['folds']))}) | {r['test_accuracy']} | "
              f"{r['test_macro_f1']} | {r['best_valid_accuracy']} | {r['sec_per_epoch']} | {r['epochs_run']} "
              f"| {r['best_epoch']} |" for r in rows]
    command = "python -m tasks.classification.cross_validation " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {"command": command, "summary": rows, "runs": runs}
    out.mkdir(parents=True, exist_ok=True)
    (out / "cv_summary.json").write_text(json.dumps(result, indent=2))
    (out / "cv_summary.md").write_text(f"`{command}`\n\n" + "\n".join(table) + "\n")
    if final:
        print("\n".join(table))
        print(f"[cv] mean ± sample std over folds; written to {out}/cv_summary.md")
    return result


def epochs_of(run_dir: Path) -> Dict:
    """{epochs_run, best_epoch} from the run's per-evaluation validation log (metrics_valid.csv), so
    that runs with early stopping show how long they trained; {} when the log is missing."""
    log = run_dir / "metrics_valid.csv"
    if not log.exists():
        return {}
    with log.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("epoch") and r.get("accuracy")]
    if not rows:
        return {}
    best = max(rows, key=lambda r: float(r["accuracy"]))  # first of equal maxima, as the trainer keeps
    return {"epochs_run": max(int(r["epoch"]) for r in rows), "best_epoch": int(best["epoch"])}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m tasks.classification.cross_validation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folds", type=int, default=None, help="run folds 0..N-1 (default: all task.data.cv_folds)")
    p.add_argument("--fold-list", default=None, help="comma-separated fold ids, e.g. 0,4,7 (overrides --folds)")
    p.add_argument("--models", default=None, help="comma-separated names substituted for {model} in overrides")
    p.add_argument("--out", default=None, help="output folder (default: outputs/cv/<date>_<time>)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for train.py")
    return p.parse_args(argv)


def main(argv=None) -> Dict:
    args = parse_args(argv)
    from tasks.classification.data import load_classification_data
    from tasks.engine.base import build_task

    def load_data(cfg):  # the data loader reads the typed task.data section, typed where every task's is
        return load_classification_data(build_task(cfg).task_cfg.data)

    models = args.models.split(",") if args.models else [None]
    if args.models is None and any("{model}" in o for o in args.overrides):
        raise ValueError("overrides contain {model} but --models was not given; pass e.g. --models sru,lstm,cnn")
    out = Path(args.out or Path("outputs") / "cv" / time.strftime("%Y-%m-%d_%H-%M-%S"))

    def overrides_for(model):
        return [o.replace("{model}", model) if model else o for o in args.overrides]

    # fold plan from the first configuration (every model shares the data settings)
    base = compose(overrides_for(models[0]))
    if base.task.name != "classification":
        raise ValueError(f"python -m tasks.classification.cross_validation runs the classification task; received task={base.task.name}. "
                         f"Add task=classification or an experiment=paper/classification_* override.")
    probe = load_data(base)
    if not probe.cross_validated:
        print(f"[cv] {base.task.data.name or base.task.data.source} has its own test split: one run, no folds")
        folds = [int(base.task.data.fold)]
    elif args.fold_list:
        folds = [int(x) for x in args.fold_list.split(",")]
    else:
        folds = list(range(args.folds if args.folds is not None else probe.n_folds))
    bad = [k for k in folds if not 0 <= k < (probe.n_folds or 1)]
    if probe.cross_validated and bad:
        raise ValueError(f"--folds/--fold-list: expected fold ids in [0, {probe.n_folds}), received {bad}")

    runs: List[Dict] = []
    for fold in folds:
        for model in models:
            overrides = overrides_for(model) + [f"task.data.fold={fold}"]
            cfg = compose(overrides)
            label = model or cfg.model.name
            n_train = len(load_data(cfg).splits["train"])
            run_dir = out / label / f"fold{fold}"
            finished = run_dir / "results.json"
            summary = json.loads(finished.read_text()) if finished.exists() else {}
            if "test" in summary:
                # resumable: a finished run is read back, not rerun (delete its folder to rerun it)
                wall = float("nan")
                print(f"[cv] {label} fold {fold}: finished before, read from {finished}", flush=True)
            else:
                run_dir.mkdir(parents=True, exist_ok=True)
                print(f"[cv] {label} fold {fold}: {' '.join(overrides)}", flush=True)
                t0 = time.time()
                summary = run(cfg, run_dir, overrides)
                wall = time.time() - t0
            rate = summary.get("train_items_per_s") or float("nan")
            runs.append({"model": label, "fold": fold, "run_dir": str(run_dir), "n_train": n_train,
                         "best_valid_accuracy": summary["best_valid"],
                         "test_accuracy": summary["test"]["accuracy"], "test_macro_f1": summary["test"]["macro_f1"],
                         "train_examples_per_s": rate, "sec_per_epoch": n_train / rate, "wall_s": wall,
                         "max_epochs": int(cfg.trainer.max_epochs or 0), **epochs_of(run_dir)})
            print(f"[cv] {label} fold {fold}: test accuracy {runs[-1]['test_accuracy']:.2f}, "
                  f"{runs[-1]['sec_per_epoch']:.1f} s/epoch", flush=True)
            summarize(runs, out, argv, final=False)

    return summarize(runs, out, argv)


if __name__ == "__main__":
    main()
