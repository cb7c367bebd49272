"""``python evaluate.py run=<run dir | model file> [split=test] [file=<data file>] [checkpoint=best]
[output=metrics.json] [out_dir=<folder>] [device=cpu] [precision=fp32|bf16|int8 [compare=fp32]] [task.*=...]`` (also
``sru-evaluate``): score a trained model on a split (precision: tasks/engine/inference/precision.py; default the
run's own trainer.precision).

The same metrics, decoding settings and predictions files as the evaluation inside training
(``predictions_<split>.json``, ``hyp_``/``ref_``/``src_<split>.txt``, ``transcripts_<split>.jsonl``),
written into a new output folder that it prints, never into the run directory. On the run's own test split
the numbers equal the ``test`` entry of its ``results.json``. ``file=`` scores exactly one file of the task's
format as the split, in every task (the task's ``scored_file`` keys); ``task.data.*`` overrides score other
data the task reads (in the task's own formats); decoding keys (a beam size, a decoding weight ...) can
change. The share of the split's tokens unknown to the vocabulary is reported as ``unk_share`` (warned above
UNKNOWN_WARN_SHARE). docs/inference.md.
"""
from __future__ import annotations

import json
import sys
import time
from contextlib import nullcontext, redirect_stdout
from pathlib import Path
from typing import Any, Dict, List, Optional

from tasks.engine.inference.options import (EVALUATE, check_for_task, command_options, one_line_errors, parse_options,
                                            split_arguments, task_given)
from tasks.engine.errors import TrainingInterrupted
from tasks.engine.training.evaluation import evaluate
from tasks.engine.inference.loader import InferenceInputError, ask_for_device, build_trained, read_trained
from tasks.engine.run.interrupts import write_text_atomic
from tasks.engine.inference.output_paths import check_out_dir, check_output_file, is_stdout, write_output
from tasks.engine.inference.precision import apply_precision, check_compare_differs, check_precision
from tasks.engine.run_metrics import json_safe
from tasks.engine.run.context import open_run

OPTIONS = command_options(EVALUATE)
# above this share of unknown tokens a score says more about the vocabulary than the model: warned
UNKNOWN_WARN_SHARE = 0.05


def output_folder(out_dir: Optional[str], task: str, split: str) -> Path:
    """A new folder for the predictions files (checked by output_paths.check_out_dir: never a run's)."""
    return Path(out_dir).expanduser() if out_dir else \
        Path("outputs") / "evaluations" / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}_{task}-{split}"


def write_json_atomic(path: Path, obj: Dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(json_safe(obj), indent=2, allow_nan=False))


def unknown_share(task: Any, split: str) -> Optional[float]:
    """The task's share of ``split``'s tokens unknown to the trained vocabulary, warned about in one line when
    above UNKNOWN_WARN_SHARE (such text is mostly scored as ``<unk>``, which is easy to predict)."""
    share = task.unknown_share(split)
    if share is not None and share > UNKNOWN_WARN_SHARE:
        print(f"[evaluate] warning: {share:.1%} of the {split} tokens are unknown to the model's vocabulary and "
              f"read as <unk>: its {task.monitor} says little about this text; score text like its training "
              f"data", flush=True)
    return share


def evaluate_run(argv: List[str]) -> Dict[str, float]:
    given, overrides, positional = split_arguments(argv, OPTIONS)
    if positional:
        raise InferenceInputError(f"{positional[0]}: expected key=value words (run=<run dir | model file> ...)")
    options = parse_options(EVALUATE, given)
    split = str(options["split"])
    if options["output"] is not None:
        check_output_file("output", options["output"], options["run"])
    scored = None if options["file"] is None else (str(options["file"]), split)
    run = read_trained(options["run"], str(options["checkpoint"]), overrides, scored_file=scored)
    task_options = task_given(options, given)
    check_for_task(run.task, task_options)  # before the model is built: an option of another task is one line
    check_compare_differs(options["compare"], options["precision"], run.cfg.trainer.precision)
    folder = output_folder(options["out_dir"], run.task.name, split)
    check_out_dir(str(folder), options["run"])
    ask_for_device(run, options["device"])
    # signals, process group, seed, threads, device: set once, as in training, before the model is built
    with open_run(run.cfg, folder, lock=False) as ctx:
        trained = build_trained(run, splits=(split,), device=ctx.device)
        task = trained.task
        if task_options:  # the task's options of evaluate.py (declared with evaluate=True), on the split's decoding
            task.use_options(check_for_task(task, task_options))
        print(f"[evaluate] {trained.source} (task={task.name}, step {trained.step}) on {split}; outputs in "
              f"{folder}", flush=True)
        if not trained.data_loaded:
            task.setup()
        if task.num_batches(split) == 0:  # a metric of nothing (NaN, or a missing key) is not a result
            what = f"file={options['file']}" if options["file"] is not None else f"the {split} split"
            raise InferenceInputError(f"{what}: no examples in it to score; give a file with at least one")
        folder.mkdir(parents=True, exist_ok=True)  # only once the data loaded: a failed start leaves no folder
        unknown = unknown_share(task, split)
        t0 = time.perf_counter()
        asked = check_precision(options["precision"], ctx.device)
        compare = check_precision(options["compare"], ctx.device, "compare")
        model, precision = apply_precision(trained.model, asked, ctx.device, ctx.config.trainer.precision,
                                           keep_fp32=task.int8_keep_fp32)
        baseline = None
        if compare is not None:  # the same split in the compared precision, reported beside
            compare_model, compare_precision = apply_precision(trained.model, compare, ctx.device,
                                                               keep_fp32=task.int8_keep_fp32)
            baseline = evaluate(task, compare_model, split, ctx.device, compare_precision, run_dir=None)
        metrics = evaluate(task, model, split, ctx.device, precision, run_dir=folder)
        if unknown is not None:
            metrics["unk_share"] = unknown
            if baseline is not None:  # the same data in both precisions: the same share
                baseline["unk_share"] = unknown
        if baseline is not None:
            metrics[f"compare_{compare}"] = baseline
            print(f"[evaluate] {split} {task.monitor} in {compare}: {baseline[task.monitor]:.4f}", flush=True)
    shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()
                      if isinstance(v, float) and ("_" not in k or k == "unk_share"))
    print(f"[evaluate] {split} {task.monitor}: {metrics[task.monitor]:.4f} ({shown}; "
          f"{time.perf_counter() - t0:.1f}s)", flush=True)
    if options["output"] is not None:  # first: a failure to write it leaves no metrics file claiming success
        write_output(str(options["output"]), json.dumps(json_safe(metrics), indent=2, allow_nan=False) + "\n")
        if not is_stdout(options["output"]):
            print(f"[evaluate] metrics: {options['output']}", flush=True)
    write_json_atomic(folder / f"metrics_{split}.json", metrics)
    return metrics


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    # output= empty or -: stdout carries the metrics JSON alone, the progress lines go to stderr
    to_stdout = any(word in ("output=", "output=-") for word in argv)
    try:
        with one_line_errors("evaluate"), (redirect_stdout(sys.stderr) if to_stdout else nullcontext()):
            evaluate_run(argv)
    except TrainingInterrupted as stop:  # SIGTERM / SIGINT: nothing to save, nothing half-written
        print(f"[evaluate] stopped by {stop.signal_name}; no metrics written", file=sys.stderr, flush=True)
        raise SystemExit(128 + stop.signum) from None


if __name__ == "__main__":
    main()
