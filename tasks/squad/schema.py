"""Schema of ``task=squad`` (conf/task/squad.yaml): types and ranges; the values live in the YAML file
(see tasks/engine/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.schema import SplitPaths, key

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class SquadDataConfig:
    source: Literal["generated", "files", "hub"]
    files: SplitPaths = key(None)            # test: null -> the valid file
    hub_name: Optional[str] = key(None)
    hub_config: Optional[str] = key(None)
    hub_splits: Optional[Dict[str, Any]] = key(None)
    cache_dir: Optional[str] = key(None)
    wiki_path: Optional[str] = key(None)
    seed: int = key(1234, low=0)
    split_fractions: List[float] = key([0.8, 0.1, 0.1], low=0, low_open=True, length=3)
    max_context_words: int = key(120, low=1)
    questions_per_context: int = key(3, low=1)
    max_context_tokens: Optional[int] = key(None, low=1)
    max_train_examples: Optional[int] = key(None, low=1)


@dataclass(kw_only=True)
class SquadEmbeddingConfig:
    dim: int = key(low=1)
    path: Optional[str] = key(None)
    format: Literal["auto", "text", "binary"] = key("auto")
    tune_partial: int = key(0, low=0)


@dataclass(kw_only=True)
class SquadConfig:
    name: Literal["squad"]
    data: SquadDataConfig
    embedding: SquadEmbeddingConfig
    batch_size: int = key(low=1)
    eval_batch_size: int = key(low=1)
    max_answer_len: int = key(low=1)
    lowercase: bool = key(True)
    min_freq: int = key(1, low=1)
    max_vocab: Optional[int] = key(None, low=2)
    emb_dropout: float = key(0.0, **Rate)
    encoder: Optional[Dict[str, Any]] = key(None)   # model.* keys written over cfg.model (checked with it)
