"""Every option of ``evaluate.py`` and ``predict.py``, in one table: its type, range or choices, the commands,
tasks and modes it applies to. Adding an option is one entry of ``OPTIONS`` (a task's predict option also
gets its default in the task's ``predict_options``).

Checked in two passes, both before the model is built (docs/inference.md#options):
- ``parse_options``: right after the command line is split, before the model file is read: type, range,
  choices, and the pairings that need no model (``checkpoint=`` only with a run directory, ``export=``
  alone, ``input=`` or positional inputs, not both);
- ``check_for_task``: once the saved config is read: an option of another task, or of another mode
  (``temperature`` with ``mode=score``, ``lm_weight`` with the greedy decoder), and ``nbest <= beam``.
A bad value is one line naming the option, the value given and what is allowed (exit status 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from omegaconf import OmegaConf

from sru.ops.precision import INFERENCE_NAMES
from tasks.engine.errors import RunError

EVALUATE, PREDICT = "evaluate", "predict"
BOTH = (EVALUATE, PREDICT)


# the speech task's widest beam (tasks/speech/decoding.py's MAX_BEAM, which the engine cannot import)
SPEECH_MAX_BEAM = 128


class OptionError(RunError, ValueError):
    """A command-line option of evaluate.py / predict.py has a wrong type, value or pairing (exit status 2)."""


def _integer(low: Optional[int], high: Optional[int] = None) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or (not isinstance(value, int) and not str(value).strip().lstrip("+-").isdigit()):
            raise ValueError
        number = int(value)
        if (low is not None and number < low) or (high is not None and number > high):
            raise ValueError
        return number
    return parse


def _number(low: float, open_low: bool) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)  # "abc" raises; "nan" / "inf" parse and are refused below
        if not math.isfinite(number) or number < low or (open_low and number == low):
            raise ValueError
        return number
    return parse


def _choice(*values: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if str(value) not in values:
            raise ValueError
        return str(value)
    return parse


def _text(value: Any) -> str:
    return str(value)


def _path(value: Any) -> str:
    if not str(value).strip():
        raise ValueError
    return str(value)


def _device(value: Any) -> str:
    import torch  # already imported by then in practice; kept local so this table stays cheap to import

    text = str(value)
    if text != "auto":
        try:
            torch.device(text)
        except (RuntimeError, ValueError):
            raise ValueError from None
    return text


@dataclass(frozen=True)
class Option:
    parse: Callable[[Any], Any]   # the given value (text from the command line) -> the value; ValueError: refused
    allowed: str                  # what is allowed, as the error message says it
    commands: Tuple[str, ...] = BOTH
    tasks: Optional[Tuple[str, ...]] = None     # None: every task
    when: Optional[Tuple[str, str]] = None      # (option, value): only in that mode, e.g. ("mode", "generate")
    default: Any = None                         # the command's default (a task option's is the task's own)

    def applies(self) -> str:
        where = [" and ".join(f"{c}.py" for c in self.commands)]
        if self.tasks:
            where.append("task=" + "/".join(self.tasks))
        if self.when:
            where.append(f"{self.when[0]}={self.when[1]}")
        return ", ".join(where)


OPTIONS: Dict[str, Option] = {
    "run": Option(_text, "a run directory or a model file"),
    "checkpoint": Option(_choice("best", "last"), "best or last, with run=<run dir> only (a model file holds one)"),
    "device": Option(_device, "a torch device: auto, cpu, cuda, cuda:N, mps"),
    "split": Option(_choice("train", "valid", "test"), "train, valid or test", (EVALUATE,), default="test"),
    "output": Option(_text, "a file in an existing, writable folder outside every run directory; empty or - "
                            "for stdout"),
    "out_dir": Option(_text, "a folder outside every run directory", (EVALUATE,)),
    "file": Option(_path, "a data file in the task's format, scored as split= (docs/inference.md#evaluatepy)",
                   (EVALUATE,)),
    "input": Option(_text, "a text file with one input per line, or - for stdin", (PREDICT,), default="-"),
    "export": Option(_text, "a new file path, given alone (no inputs, output= or task options)", (PREDICT,)),
    "batch_size": Option(_integer(1), "an integer >= 1", (PREDICT,), ("classification", "squad", "translation")),
    "mode": Option(_choice("generate", "score"), "generate or score", (PREDICT,), ("lm",)),
    "max_tokens": Option(_integer(1), "an integer >= 1", (PREDICT,), ("lm",), ("mode", "generate")),
    "temperature": Option(_number(0.0, True), "a finite number > 0", (PREDICT,), ("lm",), ("mode", "generate")),
    "top_k": Option(_integer(0), "an integer >= 0 (0: no cut)", (PREDICT,), ("lm",), ("mode", "generate")),
    "seed": Option(_integer(None), "an integer", (PREDICT,), ("lm",), ("mode", "generate")),
    "beam": Option(_integer(1), "an integer >= 1", (PREDICT,), ("translation",)),
    "nbest": Option(_integer(1), "an integer from 1 to beam", (PREDICT,), ("translation",)),
    "length_penalty": Option(_number(0.0, False), "a finite number >= 0", (PREDICT,), ("translation",)),
    "decoder": Option(_choice("greedy", "beam"), "greedy or beam", (PREDICT,), ("speech",)),
    "beam_size": Option(_integer(1, SPEECH_MAX_BEAM), f"an integer from 1 to {SPEECH_MAX_BEAM}", (PREDICT,), ("speech",),
                        ("decoder", "beam")),
    "precision": Option(_choice(*INFERENCE_NAMES), "fp32, bf16 or int8 (docs/inference.md#precision)"),
    "compare": Option(_choice(*INFERENCE_NAMES), "fp32, bf16 or int8: a second precision reported beside",
                      (EVALUATE,)),
    "lm_weight": Option(_number(0.0, False), "a finite number >= 0", (PREDICT,), ("speech",), ("decoder", "beam")),
}


def command_options(command: str) -> Dict[str, Any]:
    """The options a command knows, with their defaults (task options: None, the task's default applies)."""
    return {name: opt.default for name, opt in OPTIONS.items() if command in opt.commands}


def _refuse(name: str, value: Any, option: Option) -> OptionError:
    return OptionError(f"{name}={value}: expected {option.allowed} ({option.applies()})")


def parse_value(name: str, value: Any) -> Any:
    option = OPTIONS.get(name)
    if option is None:
        raise OptionError(f"{name}: not an option; the options are {sorted(OPTIONS)}")
    try:
        return option.parse(value)
    except (ValueError, TypeError, OverflowError):
        raise _refuse(name, value, option) from None


def parse_options(command: str, given: Mapping[str, Any], positional: Sequence[str] = ()) -> Dict[str, Any]:
    """The given options checked and converted, with the command's defaults for the others; pairings that
    need no model checked too."""
    options = command_options(command)
    for name, value in given.items():
        if name not in options:
            raise OptionError(f"{name}: not an option of {command}.py; its options are {sorted(options)}")
        if name == "run" or (name == "output" and value in ("", "-")):
            options[name] = str(value)
            continue
        options[name] = parse_value(name, value)
    if not options["run"]:
        example = "split=test" if command == EVALUATE else "< input.txt"
        raise OptionError(f"run=<run dir | model file> is required, e.g. python {command}.py run=outputs/runs/"
                          f"<date>/<time>_<id> {example}")
    if "checkpoint" in given and not Path(str(options["run"])).expanduser().is_dir():
        raise OptionError(f"checkpoint={given['checkpoint']}: only with run=<run dir> (its checkpoints/); "
                          f"run={options['run']} is a model file, which holds one set of weights")
    if options["checkpoint"] is None:
        options["checkpoint"] = "best"
    if command == PREDICT:
        _check_predict_pairings(options, given, positional)
    return options


def _check_predict_pairings(options: Mapping[str, Any], given: Mapping[str, Any], positional: Sequence[str]) -> None:
    if "export" in given:
        others = [n for n in given if n not in ("run", "checkpoint", "device", "export")]
        if others or positional:
            what = f"{others[0]}=" if others else f"the input {positional[0]!r}"
            raise OptionError(f"export={given['export']}: writes the model file and predicts nothing; given with "
                              f"{what}, one of the two would be dropped. Run export= alone")
    if "input" in given and positional:
        raise OptionError(f"input={given['input']}: given with inputs on the command line ({positional[0]!r} ...); "
                          f"pass the inputs one way, either input=<file> or as words")


def effective(name: str, given: Mapping[str, Any], task_defaults: Mapping[str, Any], cfg: Any) -> Any:
    """An option's value for this run: given, else the task's predict default, else the saved config's
    ``task.<name>`` (the speech decoder), else None."""
    if given.get(name) is not None:
        return given[name]
    if task_defaults.get(name) is not None:
        return task_defaults[name]
    return OmegaConf.select(cfg, f"task.{name}", default=None)


def check_for_task(command: str, task: str, task_defaults: Mapping[str, Any], given: Mapping[str, Any],
                   cfg: Any) -> None:
    """Once the saved config is read (before the model is built): every option given applies to this
    task and to the mode it runs in."""
    for name in given:
        option = OPTIONS[name]
        if command not in option.commands:
            continue
        if option.tasks and task not in option.tasks:
            mine = sorted(n for n, o in OPTIONS.items() if command in o.commands and o.tasks and task in o.tasks)
            raise OptionError(f"{name}={given[name]}: an option of {option.applies()}, and this is a task={task} "
                              f"model (its options: {mine or 'none'}); it would change nothing")
        if option.when:
            other, needed = option.when
            now = effective(other, given, task_defaults, cfg)
            if now != needed:
                raise OptionError(f"{name}={given[name]}: applies only with {other}={needed}, and this run uses "
                                  f"{other}={now}; it would change nothing (pass {other}={needed} too)")
    if task == "translation" and given.get("nbest") is not None:
        beam = given.get("beam") or OmegaConf.select(cfg, "task.decoding.beam_size", default=1)
        if given["nbest"] > int(beam):
            raise OptionError(f"nbest={given['nbest']}: expected an integer from 1 to beam={beam} (that many "
                              f"hypotheses exist); raise beam= or lower nbest=")
