"""The options of ``evaluate.py`` and ``predict.py``: Hydra-style ``key=value`` words, without Hydra (these
commands make no run directory and write nothing into one).

    given, overrides, positional = split_arguments(argv, command_options("predict"))
    options = parse_options("predict", given, positional)     # before the model file is read
    chosen = check_for_task(run.task, task_given)             # once the saved config is read

The engine declares only the generic keys (``OPTIONS``: run, checkpoint, device, output, input, split,
file, precision ...). A task's own predict options (type, range, choices, default, help) live in its
schema as a dataclass (``Task.predict_schema``, made with ``tasks.engine.config.command_options.option``)
and are found through the task registry, so this module knows no task.

A word ``key=value`` with a known ``key`` is an option, kept as the text given; a dotted ``task.*`` /
``trainer.*`` key is an override of the saved config; a word without ``=`` is positional (predict.py: input
files). Checked in two passes, both before the model is built (docs/inference.md#options):
- ``parse_options``: right after the command line is split, before the model file is read: type, range,
  choices (a task option against every task that declares it: the model's task is not known yet), and
  the pairings that need no model (``checkpoint=`` only with a run directory, ``export=`` alone,
  ``input=`` or positional inputs, not both);
- ``check_for_task``: once the saved config is read: an option of another task, or of another mode (an
  option whose ``when`` names another option's value), and the task's rules across options (``check``).
A bad value is one line naming the option, the value given and what is allowed; every error of these
commands is one line and exit status 2 (``one_line_errors``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Dict, Iterator, List, Mapping, Sequence, Tuple

from sru.ops.precision import INFERENCE_NAMES
from tasks.engine.base import Task, available_tasks, task_class
from tasks.engine.config.command_options import allowed_text, fields, hints, option_value
from tasks.engine.errors import RunError
from tasks.engine.inference.loader import InferenceInputError

EVALUATE, PREDICT = "evaluate", "predict"
BOTH = (EVALUATE, PREDICT)
EXIT_BAD_INPUT = 2
OVERRIDABLE_GROUPS = ("task", "trainer")  # the model's shape comes from the weights: model.* cannot change


class OptionError(InferenceInputError):
    """A command-line option of evaluate.py / predict.py has a wrong type, value or pairing (exit status 2)."""


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
    default: Any = None

    def applies(self) -> str:
        return " and ".join(f"{c}.py" for c in self.commands)


# The engine's generic keys; a task's own options are in its schema (Task.predict_schema)
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
    "precision": Option(_choice(*INFERENCE_NAMES), "fp32, bf16 or int8 (docs/inference.md#precision)"),
    "compare": Option(_choice(*INFERENCE_NAMES), "fp32, bf16 or int8: a second precision reported beside",
                      (EVALUATE,)),
}


# ---- the tasks' own options, found through the registry -------------------------------------------------

@functools.lru_cache(maxsize=None)
def task_option_schemas() -> Dict[str, type]:
    """Each task's predict options schema by task name (tasks without options left out)."""
    schemas = {name: task_class(name).predict_schema for name in available_tasks()}
    return {name: schema for name, schema in schemas.items() if schema is not None}


@dataclass(frozen=True)
class TaskOption:
    """One declaration of a task option: the tasks declaring it alike, its field and type."""
    tasks: Tuple[str, ...]
    field: dataclasses.Field
    hint: Any

    def allowed(self) -> str:
        return allowed_text(self.field, self.hint)

    def applies(self) -> str:
        when = self.field.metadata.get("when")
        command = "predict.py and evaluate.py" if self.field.metadata.get("evaluate") else "predict.py"
        return ", ".join([command, "task=" + "/".join(self.tasks), *([f"{when[0]}={when[1]}"] if when else [])])

    def refuse(self, name: str, value: Any) -> OptionError:
        return OptionError(f"{name}={value}: expected {self.allowed()} ({self.applies()})")


def declarations(name: str) -> List[TaskOption]:
    """The declarations of task option ``name``, tasks declaring it alike (same wording, same ``when``) as one."""
    grouped: Dict[Tuple[str, Any], TaskOption] = {}
    for task, schema in task_option_schemas().items():
        field = fields(schema).get(name)
        if field is None:
            continue
        hint = hints(schema)[name]
        same = (allowed_text(field, hint), field.metadata.get("when"))
        earlier = grouped.get(same)
        grouped[same] = TaskOption((*earlier.tasks, task) if earlier else (task,), field, hint)
    return list(grouped.values())


def task_option_names(command: str = PREDICT) -> List[str]:
    """The task options ``command`` takes: predict.py all, evaluate.py those declared with ``evaluate=True``."""
    return sorted({name for schema in task_option_schemas().values() for name, field in fields(schema).items()
                   if command == PREDICT or field.metadata.get("evaluate")})


def command_options(command: str) -> Dict[str, Any]:
    """The options a command knows, with their defaults (task options: None, the task's default applies)."""
    generic = {name: opt.default for name, opt in OPTIONS.items() if command in opt.commands}
    return {**generic, **{name: None for name in task_option_names(command)}}


# ---- pass 1: the command line, before the model file is read --------------------------------------------

def split_arguments(argv: Sequence[str], known: Collection[str]) -> Tuple[Dict[str, Any], List[str], List[str]]:
    """The options given (key -> text as given; ``output=`` is ``""``), the overrides, the positional words."""
    given, overrides, positional = {}, [], []
    for word in argv:
        key, sep, value = word.partition("=")
        if not sep:
            positional.append(word)
        elif key.split(".")[0] in OVERRIDABLE_GROUPS and "." in key:
            overrides.append(word)
        elif key in known:
            if key in given:
                raise OptionError(f"{key}= given twice ({key}={given[key]} and {word}); give it once")
            given[key] = value
        elif key in task_option_names():  # predict.py's decoding options: evaluate.py scores with the config's
            raise OptionError(f"{key}={value}: an option of predict.py; evaluate.py decodes as the saved config "
                              "says: override that config's task.* key instead (the run's .hydra/config.yaml "
                              "lists them)")
        else:
            raise OptionError(f"{key}: not an option{_did_you_mean(key, [*known, 'task.', 'trainer.'])}; expected "
                              f"one of {sorted(known)}, or task.* / trainer.* keys of the saved config")
    return given, overrides, positional


def _did_you_mean(key: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def parse_value(name: str, value: Any) -> Any:
    """A generic option's value, or a task option's checked against every task declaring it."""
    option = OPTIONS.get(name)
    if option is not None:
        try:
            return option.parse(value)
        except (ValueError, TypeError, OverflowError):
            raise OptionError(f"{name}={value}: expected {option.allowed} ({option.applies()})") from None
    declared = declarations(name)
    if not declared:
        known = command_options(PREDICT)
        raise OptionError(f"{name}: not an option{_did_you_mean(name, known)}; the options are {sorted(known)}")
    for declaration in declared:
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            return option_value(name, value, declaration.field, declaration.hint)
    raise declared[0].refuse(name, value)


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
        _check_predict_pairings(given, positional)
    return options


def _check_predict_pairings(given: Mapping[str, Any], positional: Sequence[str]) -> None:
    if "export" in given:
        others = [n for n in given if n not in ("run", "checkpoint", "device", "export")]
        if others or positional:
            what = f"{others[0]}=" if others else f"the input {positional[0]!r}"
            raise OptionError(f"export={given['export']}: writes the model file and predicts nothing; given with "
                              f"{what}, one of the two would be dropped. Run export= alone")
    if "input" in given and positional:
        raise OptionError(f"input={given['input']}: given with inputs on the command line ({positional[0]!r} ...); "
                          f"pass the inputs one way, either input=<file> or as words")


def task_given(options: Mapping[str, Any], given: Collection[str]) -> Dict[str, Any]:
    """The task options among the options given (the generic keys left out)."""
    return {name: options[name] for name in given if name not in OPTIONS}


# ---- pass 2: once the saved config is read ----------------------------------------------------------------

def check_for_task(task: Task, given: Mapping[str, Any]) -> Any:
    """The task's predict options (an instance of its ``predict_schema``: defaults, then ``given``), once
    every option given is checked against this task and the mode it runs in; None for a task without."""
    schema = task.predict_schema
    declared = fields(schema)
    values = {}
    for name, value in given.items():
        if name not in declared:
            where = " or ".join(d.applies() for d in declarations(name)) or "no task"
            raise OptionError(f"{name}={value}: an option of {where}, and this is a task={task.name} model "
                              f"(its options: {sorted(declared) or 'none'}); it would change nothing")
        values[name] = _task_value(name, value, TaskOption((task.name,), declared[name], hints(schema)[name]))
    if schema is None:
        return None
    chosen = schema(**values)
    for name, value in given.items():
        when = declared[name].metadata.get("when")
        if when is not None and _effective(chosen, task, when[0]) != when[1]:
            other, needed = when
            raise OptionError(f"{name}={value}: applies only with {other}={needed}, and this run uses "
                              f"{other}={_effective(chosen, task, other)}; it would change nothing (pass "
                              f"{other}={needed} too)")
    try:
        chosen.check(task.task_cfg)
    except ValueError as err:
        raise OptionError(str(err)) from None
    return chosen


def _task_value(name: str, value: Any, declaration: TaskOption) -> Any:
    try:
        return option_value(name, value, declaration.field, declaration.hint)
    except (ValueError, TypeError, OverflowError):
        raise declaration.refuse(name, value) from None


def _effective(chosen: Any, task: Task, name: str) -> Any:
    """An option's value for this run: given or the task's default, else (a None default) the trained
    model's ``task.<name>``."""
    value = getattr(chosen, name)
    return getattr(task.task_cfg, name, None) if value is None else value


# ---- errors ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def one_line_errors(command: str) -> Iterator[None]:
    """A bad path, checkpoint, option, data file or input: ``[command] error: ...`` and exit 2, no traceback
    (``SRU_FULL_ERROR=1`` shows it)."""
    try:
        yield
    except (RunError, OSError, ValueError, KeyError) as err:
        if os.environ.get("SRU_FULL_ERROR") == "1":
            raise
        text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        print(f"[{command}] error: {' '.join(str(text).split())}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
