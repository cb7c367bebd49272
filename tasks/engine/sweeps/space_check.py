"""An Optuna search space checked before trial 1: every trial of a space that can never be valid would crash.

    check_space_values(space, config, check)   # keys exist; the bounds and each choice pass the run's checks

Bounds order and log bounds are checked where the distributions are built (``study._distribution``). Here,
each key must name a key of the composed config (``+key`` a new one, with the did-you-mean of the schemas'
own check), and the extreme values a trial can draw (an interval's two bounds, every choice) must pass
``check``: the config check ``train.py`` runs before any data (``runner.check_before_work``, handed in by
the sweeper: this package sits below the runner). A value outside a schema's range (a dropout in
``interval(1.5, 2.0)``, a ``choice(1, abc)`` for a size) is refused in one line naming the key, the value
and the range, instead of one crashing trial after another.
"""
from __future__ import annotations

import copy
import difflib
from typing import Any, Callable, Iterable, Mapping

from omegaconf import DictConfig, OmegaConf, open_dict


def _values_drawn(distribution: Any) -> Iterable[Any]:
    """The values of a distribution that reach furthest: both bounds, or every choice."""
    choices = getattr(distribution, "choices", None)
    if choices is not None:
        return list(choices)
    return [distribution.low, distribution.high]


def did_you_mean(key: str, config: DictConfig) -> str:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(config, parent) if parent else config
    if not isinstance(node, DictConfig):
        return ""
    close = difflib.get_close_matches(leaf, [str(k) for k in node.keys()], n=1)
    return f" (did you mean {parent + '.' if parent else ''}{close[0]}?)" if close else ""


def _is_group_choice(key: str, config: DictConfig) -> bool:
    """``model=choice(sru,lstm)`` picks config files: each one is checked when its trial composes it."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None) or {}
    return key in choices


def check_space_keys(space: Mapping[str, Any], config: DictConfig) -> None:
    for given in space:
        key = given.lstrip("+~")
        if not given.startswith("+") and not _has_key(config, key) and not _is_group_choice(key, config):
            raise ValueError(f"search space {given}: not a key of the config{did_you_mean(key, config)}; fix "
                             f"its spelling, or write +{key} to add a new key")


def _has_key(config: DictConfig, key: str) -> bool:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(config, parent) if parent else config
    return isinstance(node, DictConfig) and leaf in node


def check_space_values(space: Mapping[str, Any], config: DictConfig, check: Callable[[DictConfig], Any]) -> None:
    """``check(cfg)`` raises ValueError (a ConfigError is one) for a config a trial could not run."""
    check_space_keys(space, config)
    run_config = copy.deepcopy(config)
    with open_dict(run_config):
        run_config.pop("hydra", None)
    try:
        check(run_config)
    except ValueError as err:  # the fixed keys already fail: every trial would, whatever it draws
        raise ValueError(f"every trial of this sweep would fail: {' '.join(str(err).split())}") from None
    for given, distribution in space.items():
        key = given.lstrip("+~")
        if _is_group_choice(key, config):
            continue
        for value in _values_drawn(distribution):
            trial_config = copy.deepcopy(run_config)
            with open_dict(trial_config):
                OmegaConf.update(trial_config, key, value, merge=False, force_add=True)
            try:
                check(trial_config)
            except ValueError as err:
                raise ValueError(f"search space {given}: a trial would draw {value!r}, which the run refuses: "
                                 f"{' '.join(str(err).split())}") from None
