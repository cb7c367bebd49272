"""Typed config schemas: one dataclass per config group, checked before any data is loaded.

    @dataclass(kw_only=True)
    class OptimizerConfig:
        name: Literal["sgd", "adam"]
        lr: float = key(low=0)
        momentum: float = key(low=0, high=1, high_open=True)

    check_schema(cfg.trainer.optimizer, OptimizerConfig, "trainer.optimizer")
    opt = typed(cfg.trainer.optimizer, OptimizerConfig, "trainer.optimizer")   # checked, then built
    opt.lr, opt.momentum                                                       # attributes, not string keys

Division of labour: the YAML files under ``conf/`` hold the values, every one of them; a schema holds
each key's type and its allowed range or choices, and never a value. A key missing from the config is
refused (every key is in its group's YAML: a config built in Python starts from
``tasks.engine.config.tree.compose``, as the command line does), and so is a key that is not in the schema
(``+trainer.max_step=5`` is a typo, not a new setting). Every error is one line naming the key, the
value received and what is allowed (``ConfigError``). tests/test_config_values.py checks that no
schema holds a default and every task x model sets every key (test_configs.py: every experiment file).

After the check, code reads one typed object, not string keys: ``typed`` runs ``check_schema`` and builds
the schema's dataclass from the node (nested sections become instances of their schemas), so a misspelt key
in code is an AttributeError at once instead of a KeyError (or a silent ``.get`` default) later. The config
that is saved with a run (config.yaml, checkpoints, model.pt) stays the plain composed mapping.

Types understood: ``int``, ``float``, ``bool``, ``str``, ``Literal[...]`` (choices), ``Optional[X]``
(null allowed), ``List[X]`` / ``Tuple[X, ...]`` (``length=`` fixes the count), ``Dict[str, Any]``
(a mapping, keys unchecked), ``Any`` (unchecked), and a nested schema dataclass (a sub-section).
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Dict, Literal, Optional, Union

from omegaconf import OmegaConf

from tasks.engine.errors import ConfigError


def as_plain(cfg: Any) -> Any:
    """A composed (OmegaConf) config node or a ``typed`` section as plain dicts/lists (interpolations
    resolved); anything else as is."""
    if OmegaConf.is_config(cfg):
        return OmegaConf.to_container(cfg, resolve=True)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return dataclasses.asdict(cfg)
    return cfg


def _number_kind(integer: bool) -> str:
    return "an integer" if integer else "a number"


def check_number(key: str, value: Any, low: Optional[float] = None, high: Optional[float] = None, *,
                 integer: bool = False, low_open: bool = False, high_open: bool = False,
                 allow_none: bool = False) -> None:
    """Raise ConfigError unless ``value`` is an int/float (int when ``integer``) inside the given bounds."""
    if value is None and allow_none:
        return
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    ok = ok and not isinstance(value, bool) and (integer or math.isfinite(value))
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if ok:
        return
    if low is not None and high is not None:
        span = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    elif low is not None:
        span = f"{'>' if low_open else '>='} {low}"
    elif high is not None:
        span = f"{'<' if high_open else '<='} {high}"
    else:
        span = ""
    null = " or null" if allow_none else ""
    raise ConfigError(f"{key}: expected {_number_kind(integer)} {span}{null}, received {value!r}".replace("  ", " "))


def check_choice(key: str, value: Any, choices) -> None:
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {list(choices)}, received {value!r}")


def check_bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, received {value!r}")


def key(*, low: Optional[float] = None, high: Optional[float] = None, low_open: bool = False,
        high_open: bool = False, length: Optional[int] = None) -> Any:
    """A schema field: its range (numbers) and its element count (lists). No default: the value of every
    key lives in conf/ (a default here would be a second one, which the YAML would silently outvote)."""
    meta = {"low": low, "high": high, "low_open": low_open, "high_open": high_open, "length": length}
    return dataclasses.field(metadata=meta)


def _hints(schema: type) -> Dict[str, Any]:
    return typing.get_type_hints(schema, include_extras=False)


def optional_inner(tp: Any):
    """(inner type, True) for Optional[inner], else (tp, False)."""
    if typing.get_origin(tp) is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            return (args[0] if len(args) == 1 else Union[tuple(args)]), True
    return tp, False


def _unknown_key(name: str, known, prefix: str, see: Optional[str]) -> ConfigError:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {prefix}.{close[0]}?)" if close else f"; {prefix} has {sorted(known)}"
    where = f" (the accepted keys: {see})" if see else ""
    return ConfigError(f"{prefix}.{name}: not a key of {prefix}{hint}. Remove it or fix its spelling{where}")


def check_schema(node: Any, schema: type, prefix: str, see: Optional[str] = None) -> None:
    """Raise ConfigError unless ``node`` (a mapping) has exactly ``schema``'s keys with allowed values.

    ``see`` names the file whose keys these are (``conf/model/lstm.yaml``), for the unknown-key error."""
    if not isinstance(node, Mapping):
        raise ConfigError(f"{prefix}: expected a section of keys ({', '.join(f.name for f in dataclasses.fields(schema))}), "
                          f"received {node!r}")
    fields = {f.name: f for f in dataclasses.fields(schema)}
    for name in node:
        if name not in fields:
            raise _unknown_key(str(name), fields, prefix, see)
    hints = _hints(schema)
    for name, f in fields.items():
        if name not in node:
            where = see or "its config group's YAML"
            raise ConfigError(f"{prefix}.{name}: missing; every key of {prefix} is set in {where}. Build the "
                              f"config with tasks.engine.config.tree.compose (as train.py does) or add "
                              f"+{prefix}.{name}=<value>")
        check_value(f"{prefix}.{name}", node[name], hints[name], f.metadata)


def typed(node: Any, schema: type, prefix: str, see: Optional[str] = None) -> Any:
    """``node`` checked against ``schema`` (``check_schema``) and returned as an instance of it.

    Nested schema sections become instances of their schemas, lists stay lists (their sections built too),
    ``Dict[str, Any]`` / ``Any`` values stay plain containers (``as_plain``). An instance of ``schema`` is
    returned as it is: it was checked when it was built, so a helper may take either form."""
    if isinstance(node, schema):
        return node
    check_schema(node, schema, prefix, see)
    return _build(as_plain(node), schema)


def _build(node: Mapping[str, Any], schema: type) -> Any:
    hints = _hints(schema)
    return schema(**{f.name: _built(node[f.name], hints[f.name]) for f in dataclasses.fields(schema)})


def _built(value: Any, tp: Any) -> Any:
    """One checked value in its typed form (see ``typed``)."""
    tp, _ = optional_inner(tp)
    if value is None or tp is Any:
        return value
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(value, tp)
    if origin in (list, tuple, Sequence):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return [_built(item, args[0] if args else Any) for item in value]
    return as_plain(value)


def check_value(where: str, value: Any, tp: Any, meta: Mapping[str, Any]) -> None:
    tp, optional = optional_inner(tp)
    if value is None:
        if optional or tp is Any:
            return
        raise ConfigError(f"{where}: expected a value, received null")
    if tp is Any:
        return
    origin = typing.get_origin(tp)
    bounds = {k: meta.get(k) for k in ("low", "high")}
    opened = {k: bool(meta.get(k)) for k in ("low_open", "high_open")}
    if tp is bool:
        check_bool(where, value)
    elif tp is int or tp is float:
        check_number(where, value, bounds["low"], bounds["high"], integer=tp is int, allow_none=optional, **opened)
    elif tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, received {value!r}")
    elif origin is Literal:
        check_choice(where, value, typing.get_args(tp))
    elif origin in (list, tuple, Sequence):
        _check_sequence(where, value, tp, meta)
    elif origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping {{key: value}}, received {value!r}")
    elif dataclasses.is_dataclass(tp):
        check_schema(value, tp, where)
    else:  # pragma: no cover - a schema author's mistake, not a user's
        raise TypeError(f"schema of {where}: unsupported type {tp!r}")


def _check_sequence(where: str, value: Any, tp: Any, meta: Mapping[str, Any]) -> None:
    length = meta.get("length")
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or (length and len(value) != length):
        count = f"{length} " if length else ""
        raise ConfigError(f"{where}: expected a list of {count}values, received {value!r}")
    args = [a for a in typing.get_args(tp) if a is not Ellipsis]
    element = args[0] if args else Any
    inner = {k: meta.get(k) for k in ("low", "high", "low_open", "high_open")}
    for i, item in enumerate(value):
        check_value(f"{where}[{i}]", item, element, inner)


@dataclasses.dataclass(kw_only=True)
class SplitPaths:
    """A section of one path per split (``task.data.files``, ``task.data.manifests``); null: none."""
    train: Optional[str] = key()
    valid: Optional[str] = key()
    test: Optional[str] = key()
