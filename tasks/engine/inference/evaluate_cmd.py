"""``python evaluate.py run=<run dir | model file> [split=test] [checkpoint=best] [output=metrics.json]
[out_dir=<folder>] [device=cpu] [task.*=...]`` (also ``sru-evaluate``): score a trained model on a split.

The same metrics, decoding settings and predictions files as the evaluation inside training
(``predictions_<split>.json``, ``hyp_``/``ref_``/``src_<split>.txt``, ``transcripts_<split>.jsonl``),
written into a new output folder that it prints, never into the run directory. On the run's own test split
the numbers equal the ``test`` entry of its ``results.json``. ``task.data.*`` overrides score other data
the task reads (a word-LM text file, a SQuAD v1.1 JSON, a translation .jsonl/.tsv, a speech manifest);
decoding keys (``task.decoding.beam_size``, ``task.lm_weight`` ...) can change. docs/inference.md.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from tasks.engine.inference.cli_args import one_line_errors, split_arguments
from tasks.engine.errors import TrainingInterrupted
from tasks.engine.training.evaluation import evaluate
from tasks.engine.inference.loader import InferenceInputError, ask_for_device, build_trained, read_trained
from tasks.engine.run.interrupts import write_text_atomic
from tasks.engine.results import json_safe
from tasks.engine.run.context import open_run
from tasks.engine.config.trainer_schema import trainer_config

OPTIONS = {"run": None, "split": "test", "checkpoint": "best", "output": None, "out_dir": None, "device": None}
SPLITS = ("train", "valid", "test")


def output_folder(out_dir: Optional[str], run: Path, task: str, split: str) -> Path:
    """A new folder for the predictions files; never the run directory or inside it."""
    folder = Path(out_dir).expanduser() if out_dir else \
        Path("outputs") / "evaluations" / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}_{task}-{split}"
    run_dir = run if run.is_dir() else None
    if run_dir is not None and folder.resolve().is_relative_to(run_dir.resolve()):
        raise InferenceInputError(f"out_dir={folder}: inside the run directory {run_dir}, which evaluate.py never "
                                  f"writes into; pick a folder outside it")
    return folder


def write_json_atomic(path: Path, obj: Dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(json_safe(obj), indent=2, allow_nan=False))


def evaluate_run(argv: List[str]) -> Dict[str, float]:
    options, overrides, positional = split_arguments(argv, OPTIONS)
    if positional:
        raise InferenceInputError(f"{positional[0]}: expected key=value words (run=<run dir | model file> ...)")
    if not options["run"]:
        raise InferenceInputError("run=<run dir | model file> is required, e.g. "
                                  "python evaluate.py run=outputs/runs/<date>/<time>_<id> split=test")
    split = str(options["split"])
    if split not in SPLITS:
        raise InferenceInputError(f"split={split}: expected one of {list(SPLITS)}")
    if options["output"] and Path(str(options["output"])).is_dir():
        raise InferenceInputError(f"output={options['output']}: a directory, not a file; output= names the "
                                  f"metrics .json file (out_dir= names the predictions folder)")
    run = read_trained(options["run"], str(options["checkpoint"]), overrides)
    folder = output_folder(options["out_dir"], Path(str(options["run"])).expanduser(), run.task.name, split)
    ask_for_device(run, options["device"])
    # signals, process group, seed, threads, device: set once, as in training, before the model is built
    with open_run(run.cfg, folder, lock=False) as ctx:
        trained = build_trained(run, splits=(split,), device=ctx.device)
        task = trained.task
        print(f"[evaluate] {trained.source} (task={task.name}, step {trained.step}) on {split}; outputs in "
              f"{folder}", flush=True)
        if not trained.data_loaded:
            task.setup()
        folder.mkdir(parents=True, exist_ok=True)  # only once the data loaded: a failed start leaves no folder
        t0 = time.perf_counter()
        precision = trainer_config(run.cfg).precision
        metrics = evaluate(task, trained.model, split, ctx.device, precision, run_dir=folder)
    shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float) and "_" not in k)
    print(f"[evaluate] {split} {task.monitor}: {metrics[task.monitor]:.4f} ({shown}; "
          f"{time.perf_counter() - t0:.1f}s)", flush=True)
    write_json_atomic(folder / f"metrics_{split}.json", metrics)
    if options["output"]:
        write_json_atomic(Path(str(options["output"])).expanduser(), metrics)
        print(f"[evaluate] metrics: {options['output']}", flush=True)
    return metrics


def main(argv: Optional[List[str]] = None) -> None:
    try:
        with one_line_errors("evaluate"):
            evaluate_run(list(sys.argv[1:] if argv is None else argv))
    except TrainingInterrupted as stop:  # SIGTERM / SIGINT: nothing to save, nothing half-written
        print(f"[evaluate] stopped by {stop.signal_name}; no metrics written", file=sys.stderr, flush=True)
        raise SystemExit(128 + stop.signum) from None


if __name__ == "__main__":
    main()
