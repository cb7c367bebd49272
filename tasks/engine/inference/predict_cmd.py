"""``python predict.py run=<run dir | model file> [input=<file>|-] [output=<file>|-]
[precision=fp32|bf16|int8] [<task options>] [task.*=...] [inputs ...]`` (also ``sru-predict``): use a trained
model on your own input. The task options are the task's own (its ``predict_schema``; docs/inference.md#options).

Reads one input per line (stdin by default; words without ``=`` are inputs too, e.g. audio files) and
writes one result per input, in input order, in the task's format (``format_prediction``: text as it is,
anything else as JSON lines; ``format_output`` may add a total line, or give a whole-file input format its
own output form). A bad line is reported on stderr with its number, the other
lines are still written, and the exit status is 2. ``export=<file>`` writes the run's self-contained
model file instead (for runs made before every run wrote model.pt).

    from tasks.engine.inference.predict_cmd import load_predictor
    predictor = load_predictor("model.pt")
    predictor.predict(["one input", "another"])   # one result per input, in order
"""
from __future__ import annotations

import codecs
import sys
import time
from contextlib import nullcontext, redirect_stdout
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from omegaconf import OmegaConf

from tasks.engine.base import BadInput
from tasks.engine.errors import TrainingInterrupted
from tasks.engine.inference.loader import (InferenceInputError, Trained, ask_for_device, build_trained, load_trained,
                                           read_trained, write_model_file)
from tasks.engine.inference.options import (EXIT_BAD_INPUT, PREDICT, check_for_task, command_options,
                                            one_line_errors, parse_options, parse_value, split_arguments,
                                            task_given)
from tasks.engine.inference.output_paths import check_output_file, write_output
from tasks.engine.inference.precision import apply_precision, check_precision
from tasks.engine.run.context import open_run
from tasks.engine.run.devices import autocast

PROGRESS_ABOVE = 200  # inputs: a progress bar on stderr beyond this many


class Predictor:
    """``predict(inputs)`` -> results (the task's ``predict`` hook); ``task`` and ``model`` are the loaded ones."""

    def __init__(self, trained: Trained, options: Optional[Dict[str, Any]] = None, precision: Optional[str] = None):
        self.trained, self.task = trained, trained.task
        # fp32 / bf16 / int8 (tasks/engine/inference/precision.py): int8 quantises a copy here, at load time
        self.model, self.precision = apply_precision(trained.model, check_precision(precision, trained.device),
                                                     trained.device, keep_fp32=self.task.int8_keep_fp32)
        given = {name: parse_value(name, value) for name, value in (options or {}).items() if value is not None}
        self.options = check_for_task(self.task, given)  # the task's predict_schema, defaults and given

    def predict(self, inputs: Sequence[Any], show_progress: bool = False) -> List[Any]:
        bar = None
        if show_progress and len(inputs) > PROGRESS_ABOVE:
            from tqdm import tqdm
            bar = tqdm(total=len(inputs), unit="input", file=sys.stderr, dynamic_ncols=True)
        with torch.no_grad(), autocast(self.trained.device, self.precision), \
                (bar if bar is not None else nullcontext()):
            results = self.task.predict(self.model, list(inputs), self.options,
                                        bar.update if bar is not None else (lambda n: None))
        if len(results) != len(inputs):
            raise RuntimeError(f"task={self.task.name}'s predict returned {len(results)} results for "
                               f"{len(inputs)} inputs")
        return results


def load_predictor(path: Any, checkpoint: str = "best", overrides: Sequence[str] = (), device: Optional[str] = None,
                   precision: Optional[str] = None, **options: Any) -> Predictor:
    """A notebook's way in: ``load_predictor("model.pt").predict([...])``; ``precision="int8"`` or ``"bf16"``
    as the command's option."""
    return Predictor(load_trained(path, checkpoint, overrides, device=device), options, precision)


def run_predict(argv: List[str]) -> int:
    given, overrides, positional = split_arguments(argv, command_options(PREDICT))
    options = parse_options(PREDICT, given, positional)
    options["output"] = "-" if options["output"] is None else options["output"]  # predict.py: stdout by default
    if options["export"] is not None:
        check_output_file("export", options["export"], options["run"])
    else:
        check_output_file("output", str(options["output"]), options["run"],
                          [options["input"], *positional] if not positional else positional)
    run = read_trained(options["run"], str(options["checkpoint"]), overrides)
    task_options = task_given(options, given)
    check_for_task(run.task, task_options)
    ask_for_device(run, options["device"])
    # signals, seed, threads, device: the run context training uses; no run directory (only named files written)
    with open_run(run.cfg, None, lock=False) as ctx:
        trained = build_trained(run, device=ctx.device)
        if options["export"] is not None:
            return export(trained, Path(str(options["export"])).expanduser())
        predictor = Predictor(trained, task_options, options["precision"])
        return predict_lines(predictor, options, positional)


def predict_lines(predictor: Predictor, options: Dict[str, Any], positional: List[str]) -> int:
    """Read the inputs, predict, write one result per input in input order; 2 when a line was bad."""
    task = predictor.task
    numbered, errors, document = read_inputs(task, str(options["input"]), positional)
    for warning in task.input_warnings(numbered):
        print(f"[predict] warning: {warning}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    results = predictor.predict([x for _, x in numbered], show_progress=True) if numbered else []
    seconds = time.perf_counter() - t0
    formatted = {n: task.format_prediction(r) for (n, _), r in zip(numbered, results)}
    formatted.update({n: task.format_prediction(BadInput(n, e)) for n, e in errors})
    lines = [formatted[n] for n in sorted(formatted)]
    write_output(str(options["output"]), task.format_output(lines, results, document))
    audio = sum(r.get("seconds", 0.0) for r in results if isinstance(r, dict))
    rtf = f"; real-time factor {seconds / audio:.4f} ({audio:.1f} s of audio)" if audio else ""
    print(f"[predict] {len(results)} inputs in {seconds:.2f} s ({len(results) / max(seconds, 1e-9):.1f}/s{rtf})",
          file=sys.stderr, flush=True)
    return EXIT_BAD_INPUT if errors else 0


def read_inputs(task: Any, source: str, positional: List[str]
                ) -> Tuple[List[Tuple[int, Any]], List[Tuple[int, str]], Optional[List[Any]]]:
    """The inputs by line number, the lines refused (number, reason; each said on stderr at once), and the
    whole-file document they came from (``task.read_document``), if any."""
    raw = read_lines(source, positional)
    readable = not positional and not any(isinstance(line, BadLine) for line in raw)
    document = task.read_document("\n".join(raw)) if readable else None
    where = "argument" if positional else "stdin" if source == "-" else f"input={source}"
    if document is not None:
        if not document:  # as an empty input is: nothing to predict is not a success
            raise InferenceInputError(f"{where}: a task={task.name} document with no inputs in it (nothing to "
                                      f"predict); give at least one")
        return list(enumerate(document, 1)), [], document
    numbered, errors = [], []
    for number, line in enumerate(raw, 1):
        try:
            if isinstance(line, BadLine):
                raise ValueError(str(line))
            numbered.append((number, task.parse_input(line)))
        except ValueError as err:
            errors.append((number, str(err)))
            print(f"[predict] error: {where} line {number}: {err}", file=sys.stderr, flush=True)
    if not numbered and not errors:
        raise InferenceInputError(f"{where}: empty; give one input per line")
    return numbered, errors, None


class BadLine(str):
    """A line that could not be decoded: its text is the reason (parse_input is not called on it)."""


def read_lines(source: str, positional: List[str]) -> List[str]:
    """The inputs, one per line (or the positional words), read as bytes and decoded line by line: a line
    that is not UTF-8 becomes a ``BadLine`` (a line error naming the file and the line; the other lines still
    run); input holding NUL bytes is binary (an audio file, a model file) and refused whole, as evaluate.py's
    data readers do (docs/inference.md#inputs)."""
    if positional:
        return list(positional)
    name = "stdin" if source == "-" else source
    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(source).expanduser()
        if path.is_dir():
            raise InferenceInputError(f"input={path}: a directory, not a file; pass a file with one input per line")
        if not path.is_file() and not path.exists():
            raise InferenceInputError(f"input={path}: no such file; pass a file with one input per line, or - "
                                      f"for stdin")
        data = path.read_bytes()
    if data.startswith(codecs.BOM_UTF8):  # Notepad's UTF-8 mark, not part of the first input (was its first char)
        data = data[len(codecs.BOM_UTF8):]
    if b"\x00" in data:
        line = data[:data.index(b"\x00")].count(b"\n") + 1
        raise InferenceInputError(f"input={name}: binary data (a NUL byte on line {line}), not text; give one input "
                                  f"per line as UTF-8 text (audio: one file path per line)")
    return [decode_line(raw) for raw in data.splitlines()]  # bytes split on \n, \r\n, \r only


def decode_line(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return BadLine(f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}); save the "
                       f"input as UTF-8 (iconv -t utf-8)")


def export(trained: Trained, path: Path) -> int:
    if path.exists():
        raise InferenceInputError(f"export={path}: the file exists and is never overwritten; remove it or pick "
                                  f"another name")
    config = OmegaConf.to_container(trained.cfg, resolve=True)
    weights = {k: v.cpu() for k, v in trained.model.state_dict().items()}
    write_model_file(path, trained.task, config, weights, trained.step)
    print(f"[predict] wrote {path} ({path.stat().st_size / 2**20:.1f} MiB) from {trained.source}", file=sys.stderr)
    return 0


def main(argv: Optional[List[str]] = None) -> None:
    # stdout carries the results alone: what the task prints while loading and predicting goes to stderr
    try:
        with one_line_errors("predict"), redirect_stdout(sys.stderr):
            status = run_predict(list(sys.argv[1:] if argv is None else argv))
    except TrainingInterrupted as stop:  # SIGTERM / SIGINT: results are written only at the end, atomically
        print(f"[predict] stopped by {stop.signal_name}; no results written", file=sys.stderr, flush=True)
        raise SystemExit(128 + stop.signum) from None
    except KeyboardInterrupt:  # Ctrl-C before the run context was entered (while reading the model file)
        print("[predict] stopped by SIGINT; no results written", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    raise SystemExit(status)


if __name__ == "__main__":
    main()
