"""A config saved by an earlier version (a checkpoint's ``config``, a run's ``.hydra/config.yaml``) lacks
the keys conf/ gained since; the schemas refuse a config with a key missing (they hold no defaults).

    saved = OmegaConf.create(checkpoint["config"])
    added = fill_added_keys(saved, compose(group_choices(saved)))     # compose: tasks.engine.config.tree

Each missing key is taken from conf/, composed for the saved run's task, model and logger. For a model
or task key that is the value the run was built with, because such a key joins a YAML file with the
value the code used while it was absent (conf/model/sru.yaml's ``v1: false`` is sru.SRU's own default);
a trainer key (``flush_denormal``) takes today's value, as trainer.* may change on any resume. Keys the
saved config has are never changed, so a saved run stays the run it was.
"""
from __future__ import annotations

from typing import List

from omegaconf import DictConfig, OmegaConf

GROUPS = ("trainer", "model", "task", "logger")


def group_choices(saved: DictConfig) -> List[str]:
    """The command-line choices (``task=<name> model=sru logger=csv``) that compose the saved config's groups."""
    return [f"{group}={saved[group]['name']}" for group in ("task", "model", "logger")
            if OmegaConf.select(saved, f"{group}.name") is not None]


def _fill(saved: DictConfig, current: DictConfig, prefix: str, added: List[str]) -> None:
    for name, value in current.items():
        if name not in saved:
            saved[name] = value
            added.append(f"{prefix}.{name}")
        elif isinstance(saved[name], DictConfig) and isinstance(value, DictConfig):
            _fill(saved[name], value, f"{prefix}.{name}", added)


def fill_added_keys(saved: DictConfig, current: DictConfig) -> List[str]:
    """Complete ``saved`` in place with the keys of ``current`` (conf/, composed) it lacks; return their
    dotted names (for a notice: the run continues with them)."""
    added: List[str] = []
    for group in GROUPS:
        if isinstance(saved.get(group), DictConfig) and group in current:
            _fill(saved[group], current[group], group, added)
    return added
