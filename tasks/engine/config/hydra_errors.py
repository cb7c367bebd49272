"""Hydra's composition errors as one line with the choices or a did-you-mean, before Hydra prints its own.

    check_composes(sys.argv[1:])   # raises ConfigError: task=nosuchtask, trainer.max_step=5

Hydra reports a config file that does not exist (``task=nosuchtask``) as a 15-line block with its search
path, and an override of a key that does not exist (``trainer.max_step=5``) as "Key 'max_step' is not in
struct", without the key that was meant. So ``train.py`` composes the command line's config once before
Hydra does (a fraction of a second) and says it in one line. Only plain command lines are checked here
(overrides, ``-m``); with ``--config-dir`` / ``--config-name``, ``hydra.searchpath`` and Hydra's own flags
Hydra reports as before, and anything this check cannot parse or compose for another reason is left to
Hydra too.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, List, Optional, Sequence

from tasks.engine.errors import ConfigError

MULTIRUN_FLAGS = ("-m", "--multirun")
GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic"
MAX_LISTED = 12  # a group of more files (experiment/) is named with a count, not listed


def one_line(err: BaseException) -> str:
    """Hydra's message without its line breaks and its see-also links (named by the caller)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and not line.startswith("See http")]
    return " ".join(lines)


def _options(group_dir: Path) -> List[str]:
    return sorted(str(p.relative_to(group_dir).with_suffix("")) for p in group_dir.rglob("*.yaml"))


def _hint(wrong: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(wrong, list(options), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _values(override: Any) -> List[str]:
    """The value of an override, or each value of a list sweep (``a,b`` / ``choice(a, b)``); [] for ranges."""
    if not override.is_sweep_override():
        return [override.value()]
    try:
        return list(override.sweep_string_iterator())
    except Exception:  # noqa: BLE001 - interval()/range(): no values to check here (the Optuna space check)
        return []


def check_group_choice(key: str, value: Any, conf_dir: Path) -> None:
    if value is None or str(value) == "null" or (conf_dir / key / f"{value}.yaml").is_file():
        return
    options = _options(conf_dir / key)
    shown = ", ".join(options) if len(options) <= MAX_LISTED else f"{len(options)} files"
    raise ConfigError(f"{key}={value}: no such config {key}/{value}.yaml{_hint(str(value), options)}; the choices: "
                      f"{shown} (conf/{key}/)")


def _first_of_each(overrides: Sequence[Any], conf_dir: Path) -> List[str]:
    """The command line as one composable config: a group's values checked as files, a sweep's first value."""
    line = []
    for o in overrides:
        key = o.get_key_element().lstrip("+~")
        if key.startswith("hydra"):
            continue
        values = _values(o)
        if (conf_dir / key).is_dir() and "@" not in key:
            for value in values:
                check_group_choice(key, value, conf_dir)
        if values:
            prefix = o.input_line[:len(o.input_line) - len(o.input_line.lstrip("+~"))]
            line.append(f"{prefix}{key}={values[0]}" if o.is_sweep_override() else o.input_line)
    return line


def _not_a_key(key: str, item: str, base: Any) -> ConfigError:
    from omegaconf import DictConfig, OmegaConf

    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(base, parent, default=None) if parent and base is not None else base
    known = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    close = difflib.get_close_matches(leaf, known, n=1)
    hint = f" (did you mean {parent + '.' if parent else ''}{close[0]}?)" if close else ""
    return ConfigError(f"{item}: {leaf} is not a key of {parent or 'the config'}{hint}. Fix its spelling (+{item} "
                       f"would add it as a new key)")


def check_composes(argv: Sequence[str], conf_dir: Optional[Path] = None) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import ConfigKeyError

    from tasks.engine.config.tree import CONF_DIR, compose

    conf_dir = conf_dir or CONF_DIR
    args = [a for a in argv if a not in MULTIRUN_FLAGS]
    if any(a.startswith("-") or a.lstrip("+").startswith("hydra.searchpath") for a in args):
        return  # Hydra's flags (--config-dir, --cfg, --help, ...) or another config tree: Hydra's own reports
    parser, parsed = OverridesParser.create(), []
    for arg in args:
        try:
            parsed += parser.parse_overrides([arg])
        except HydraException as err:  # a syntax error: Hydra's message, on one line
            raise ConfigError(f"{arg}: {one_line(err)} (the override syntax: {GRAMMAR})") from None
    line = _first_of_each(parsed, conf_dir)
    try:
        compose(line, conf_dir)
    except MissingConfigException as err:
        options = list(getattr(err, "options", None) or [])
        wrong = str(getattr(err, "missing_cfg_file", "") or "")
        raise ConfigError(f"no config {wrong}.yaml{_hint(wrong.rpartition('/')[2], options)}; the choices: "
                          f"{', '.join(options)}") from None
    except HydraException as err:
        cause = err.__cause__
        if not isinstance(cause, (ConfigKeyError, AttributeError)) or "not in struct" not in str(cause):
            raise ConfigError(one_line(err)) from None  # e.g. +seed=3: "Could not append ... Either remove +"
        key = str(getattr(cause, "full_key", "") or "")
        item = next((i for i in line if i.partition("=")[0] == key), key)
        try:
            base = compose([i for i in line if i != item], conf_dir)
        except Exception:  # noqa: BLE001 - the hint is optional
            base = None
        raise _not_a_key(key, item, base) from None
