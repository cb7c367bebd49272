"""Schema of ``task=lm`` / ``task=lm_char`` (conf/task/lm.yaml, lm_char.yaml): types and ranges; the
values live in the YAML files (see tasks/engine/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.schema import key

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class LMDataConfig:
    source: Literal["ptb", "files", "file", "gensim_wiki", "hf"]
    level: Literal["word", "char"]
    train_file: Optional[str] = key(None)        # source=files
    valid_file: Optional[str] = key(None)
    test_file: Optional[str] = key(None)
    file: Optional[str] = key(None)              # source=file, split by split_fractions
    split_fractions: List[float] = key([0.9, 0.05, 0.05], low=0, low_open=True, length=3)
    hf_name: Optional[str] = key(None)
    hf_config: Optional[str] = key(None)
    hf_data_files: Optional[Dict[str, Any]] = key(None)
    text_field: str = key("text")
    max_vocab: Optional[int] = key(None, low=2)
    max_train_tokens: Optional[int] = key(None, low=1)


@dataclass(kw_only=True)
class LMConfig:
    name: Literal["lm"]
    data: LMDataConfig
    batch_size: int = key(low=1)
    eval_batch_size: int = key(low=1)
    bptt: int = key(low=1)
    emb_size: Optional[int] = key(None, low=1)
    emb_dropout: float = key(0.0, **Rate)
    out_dropout: float = key(0.0, **Rate)
    tie_weights: bool = key(True)
