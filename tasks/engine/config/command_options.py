"""Typed schemas of a command's options: a task's ``predict.py`` options, declared once in its own schema.

    @dataclass(kw_only=True)
    class LMPredictOptions(CommandOptions):
        mode: Literal["generate", "score"] = option("generate", help="continue each line, or score it")
        max_tokens: int = option(50, low=1, when=("mode", "generate"), help="tokens generated at most")

Unlike a config key (``key()``, whose value lives in conf/), an option has a default here: a command
line names only what it changes. A default of None means "the trained model's ``task.<name>``". The
value given is checked by the typed-config code (``schema.check_value``: type, range, choices) after
its text is read as the field's type; ``check`` holds the rules across options and the saved config.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal, Optional, Tuple

from tasks.engine.config.schema import check_value, optional_inner


def option(default: Any, *, help: str, low: Optional[float] = None, high: Optional[float] = None,
           low_open: bool = False, high_open: bool = False, when: Optional[Tuple[str, Any]] = None,
           allowed: Optional[str] = None, evaluate: bool = False) -> Any:
    """A command option's field: its default, what it does (``help``), its range, the (option, value) it
    applies with (``when``: refused otherwise, it would change nothing), and ``allowed``, the wording of
    what is allowed where the type and range alone do not say it, and ``evaluate``: evaluate.py takes it too
    (applied to the split's decoding by the task's ``use_options``)."""
    meta = {"low": low, "high": high, "low_open": low_open, "high_open": high_open, "help": help,
            "when": when, "allowed": allowed, "evaluate": evaluate}
    return dataclasses.field(default=default, metadata=meta)


class CommandOptions:
    """Base of an options schema (a dataclass of ``option()`` fields)."""

    def check(self, task_cfg: Any) -> None:
        """Rules across options and the trained model's typed ``task.*``: raise ValueError naming the option
        (``nbest=8: expected an integer from 1 to beam=6 ...``). Default: none."""
        del task_cfg


def fields(schema: Optional[type]) -> typing.Dict[str, dataclasses.Field]:
    """The options of ``schema`` by name (None: a command or task without options)."""
    return {} if schema is None else {f.name: f for f in dataclasses.fields(schema)}


def _bound(sign: str, value: float, is_open: bool) -> str:
    return f"{sign}{'' if is_open else '='} {value}"


def allowed_text(field: dataclasses.Field, hint: Any) -> str:
    """What the option allows, as an error says it: ``an integer >= 1``, ``a finite number > 0``,
    ``greedy or beam`` (or the field's own ``allowed`` wording)."""
    meta = field.metadata
    if meta.get("allowed"):
        return meta["allowed"]
    tp, _ = optional_inner(hint)
    if typing.get_origin(tp) is Literal:
        choices = [str(c) for c in typing.get_args(tp)]
        return " or ".join([", ".join(choices[:-1]), choices[-1]] if len(choices) > 1 else choices)
    if tp in (int, float):
        kind = "an integer" if tp is int else "a finite number"
        low, high = meta.get("low"), meta.get("high")
        if low is not None and high is not None and not meta.get("low_open") and not meta.get("high_open"):
            return f"{kind} from {low} to {high}"
        bounds = ([_bound(">", low, meta.get("low_open"))] if low is not None else []) + \
            ([_bound("<", high, meta.get("high_open"))] if high is not None else [])
        return f"{kind} {' and '.join(bounds)}" if bounds else kind
    if tp is bool:
        return "true or false"
    return "a text"


def from_text(value: Any, hint: Any) -> Any:
    """A command-line word read as the field's type (a value already typed, from Python, as it is);
    ValueError when it cannot be. The range and choices are checked after, by ``check_value``."""
    if not isinstance(value, str):
        return value
    tp, _ = optional_inner(hint)
    if tp is int:
        if not value.strip().lstrip("+-").isdigit():
            raise ValueError(value)
        return int(value)
    if tp is float:
        return float(value)  # "abc" raises; "nan" / "inf" parse and are refused by the range check
    if tp is bool:
        if value.lower() not in ("true", "false"):
            raise ValueError(value)
        return value.lower() == "true"
    return value


def option_value(name: str, value: Any, field: dataclasses.Field, hint: Any) -> Any:
    """``name=value`` read and checked against its field; ValueError when refused (the caller says what
    is allowed with ``allowed_text``)."""
    typed_value = from_text(value, hint)
    try:
        check_value(name, typed_value, hint, field.metadata)
    except ValueError as err:  # ConfigError is one
        raise ValueError(str(err)) from None
    return typed_value


def hints(schema: type) -> typing.Dict[str, Any]:
    return typing.get_type_hints(schema)
