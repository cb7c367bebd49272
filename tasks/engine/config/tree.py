"""The config tree and composing it: the config ``python train.py <overrides>`` runs with.

    cfg = compose(["task=<name>", "model=lstm"])  # without the hydra node

``CONF_DIR`` is the checkout's ``conf/`` (editable installs, a clone), else the copy a regular
``pip install .`` puts under ``<prefix>/share/sru-experiments/conf``, or ``$SRU_CONF_DIR``. Apart from the
runner so that the model loader (tasks/engine/inference/loader.py) can complete an old saved config without
importing the training pipeline.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from omegaconf import DictConfig


def find_conf_dir() -> Path:
    candidates = [os.environ.get("SRU_CONF_DIR"), Path(__file__).resolve().parents[3] / "conf",
                  Path(sys.prefix) / "share" / "sru-experiments" / "conf"]
    for c in candidates:
        if c and (Path(c) / "config.yaml").is_file():
            return Path(c)
    raise FileNotFoundError("no config tree found (conf/config.yaml): set SRU_CONF_DIR=/path/to/conf "
                            "or run from a checkout of the repository")


CONF_DIR = find_conf_dir()


def compose(overrides: Sequence[str] = (), config_dir: Optional[Path] = None) -> DictConfig:
    """The config ``python train.py <overrides>`` would run with (without the hydra node)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if config_dir is None and GlobalHydra.instance().is_initialized():
        # inside train.py's Hydra app (a resume completing an old config): its own search path, no second init
        return hydra_compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=str(config_dir or CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))
