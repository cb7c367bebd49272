"""Where the speech task keeps prepared corpora and cached features: ``$SRU_DATA_DIR/speech``, else
``~/.cache/sru-experiments/speech`` (``task.data.cache_dir`` overrides it per run)."""
from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    root = os.environ.get("SRU_DATA_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "sru-experiments") / "speech"
