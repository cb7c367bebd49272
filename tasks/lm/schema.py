"""Schema of ``task=lm`` / ``task=lm_char`` (conf/task/lm.yaml, lm_char.yaml): types and ranges; the
values live in the YAML files (see tasks/engine/config/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.config.command_options import CommandOptions, option
from tasks.engine.config.schema import key

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class LMDataConfig:
    source: Literal["ptb", "files", "file", "gensim_wiki", "hf"]
    level: Literal["word", "char"]
    train_file: Optional[str] = key()        # source=files
    valid_file: Optional[str] = key()
    test_file: Optional[str] = key()
    file: Optional[str] = key()              # source=file, split by split_fractions
    split_fractions: List[float] = key(low=0, low_open=True, length=3)
    hf_name: Optional[str] = key()
    hf_config: Optional[str] = key()
    hf_data_files: Optional[Dict[str, Any]] = key()
    text_field: str = key()
    max_vocab: Optional[int] = key(low=2)
    max_train_tokens: Optional[int] = key(low=1)


@dataclass(kw_only=True)
class LMConfig:
    name: Literal["lm"]
    data: LMDataConfig
    batch_size: int = key(low=1)
    eval_batch_size: int = key(low=1)
    bptt: int = key(low=1)
    emb_size: Optional[int] = key(low=1)
    emb_dropout: float = key(**Rate)
    out_dropout: float = key(**Rate)
    tie_weights: bool = key()


GENERATE = ("mode", "generate")


@dataclass(kw_only=True)
class LMPredictOptions(CommandOptions):
    """predict.py's options of a language model (docs/inference.md#options): continue each line, or score it."""
    mode: Literal["generate", "score"] = option("generate", help="generate: each line's continuation; score: its "
                                                                 "log-probability, perplexity or bits per character")
    max_tokens: int = option(50, low=1, when=GENERATE, help="tokens generated at most (a line end stops sooner)")
    temperature: float = option(1.0, low=0, low_open=True, when=GENERATE, help="sampling temperature")
    top_k: int = option(0, low=0, when=GENERATE, allowed="an integer >= 0 (0: no cut)",
                        help="sample among the k likeliest tokens only")
    seed: int = option(0, when=GENERATE, help="the sampling generator's seed")
