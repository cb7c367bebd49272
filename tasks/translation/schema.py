"""Schemas of ``task=translation`` (conf/task/translation.yaml) and of its models ``model=transformer``
/ ``transformer_sru`` (conf/model/transformer*.yaml): types and ranges; the values live in the YAML
files (see tasks/engine/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Literal, Optional

from tasks.engine.schema import key

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class TranslationDataConfig:
    source: Literal["dictionary", "files", "hub"]
    dictionary_path: Optional[str] = key(None)
    cache_dir: Optional[str] = key(None)
    min_words: int = key(1, low=1)
    max_words: int = key(100, low=1)
    valid_size: int = key(500, low=1)
    test_size: int = key(1000, low=1)
    split_seed: int = key(1234, low=0)
    files: Optional[Dict[str, Any]] = key(None)
    hub_name: Optional[str] = key(None)
    hub_config: Optional[str] = key(None)
    hub_splits: Optional[Dict[str, Any]] = key(None)
    max_train_examples: Optional[int] = key(None, low=1)


@dataclass(kw_only=True)
class SubwordConfig:
    model_type: Literal["unigram", "bpe"]
    vocab_size: int = key(low=300)     # 256 byte-fallback pieces + the specials + the characters
    character_coverage: float = key(1.0, low=0, high=1, low_open=True)
    max_sentences: int = key(2_000_000, low=1)


@dataclass(kw_only=True)
class DecodingConfig:
    valid_beam_size: int = key(1, low=1)
    beam_size: int = key(4, low=1)
    length_penalty: float = key(1.0, low=0)
    max_len_a: float = key(1.5, low=0)
    max_len_b: int = key(10, low=1)


@dataclass(kw_only=True)
class TranslationConfig:
    name: Literal["translation"]
    src_lang: str
    tgt_lang: str
    data: TranslationDataConfig
    subwords: SubwordConfig
    decoding: DecodingConfig
    max_subwords: int = key(low=1)
    max_tokens: int = key(low=1)
    max_sentences: int = key(low=1)
    eval_max_tokens: int = key(low=1)
    eval_max_sentences: int = key(low=1)
    label_smoothing: float = key(0.0, **Rate)


@dataclass(kw_only=True)
class SRUSublayerConfig:
    mode: Literal["none", "replace_ffn", "before_ffn"]
    num_layers: int = key(1, low=1)
    dropout: float = key(0.0, **Rate)
    rnn_dropout: float = key(0.0, **Rate)
    highway_bias: float = key(0.0)
    rescale: bool = key(False)
    projection_size: int = key(0, low=0)
    encoder_bidirectional: bool = key(True)


@dataclass(kw_only=True)
class TransformerConfig:
    name: Literal["transformer", "transformer_sru"]
    sru: SRUSublayerConfig
    d_model: int = key(low=1)
    attention_heads: int = key(low=1)
    ffn_dim: int = key(low=1)
    encoder_layers: int = key(low=1)
    decoder_layers: int = key(low=1)
    norm: Literal["pre", "post"] = key("pre")
    dropout: float = key(0.0, **Rate)
    attention_dropout: float = key(0.0, **Rate)
    activation_dropout: float = key(0.0, **Rate)
    share_all_embeddings: bool = key(True)
    share_decoder_input_output_embed: bool = key(True)
    max_positions: int = key(low=2)
