"""What ``train.py``'s command line adds that no schema sees: a new top-level key (``+sed=3``).

Hydra lets ``+key=value`` add any key, and the schemas check only the sections they own (trainer, model,
task), so a misspelt top-level key was accepted and the run trained without it. Nothing reads a top-level
key the config does not define, so one given on the command line is refused, with the closest existing key.
A config group (``+experiment=...``, ``+hparams_search=...``) picks a file, not a key, and is not refused.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Mapping, Sequence

from tasks.engine.errors import ConfigError


def added_top_level_key(item: str) -> str:
    """``+sed=3`` / ``++sed=3`` -> ``sed``; anything else (a nested key, a group@package, a plain override) -> ''."""
    key = item.partition("=")[0]
    if not key.startswith("+"):
        return ""
    key = key.lstrip("+")
    return "" if any(c in key for c in "./@") else key


def check_top_level_keys(cfg: Mapping[str, Any], overrides: Sequence[str], conf_dir: Path) -> None:
    added = {added_top_level_key(item) for item in overrides} - {""}
    known = sorted(str(k) for k in cfg if str(k) not in added)
    for item in overrides:
        key = added_top_level_key(item)
        if not key or (conf_dir / key).is_dir():
            continue
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f"; the top-level keys are {known}"
        raise ConfigError(f"{item}: {key} is not a top-level key of the config, and nothing reads it{hint}. Remove "
                          f"it or fix its spelling (the top-level keys: conf/config.yaml)")
