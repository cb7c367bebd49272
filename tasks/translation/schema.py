"""Schemas of ``task=translation`` (conf/task/translation.yaml) and of its models ``model=transformer``
/ ``transformer_sru`` (conf/model/transformer*.yaml): types and ranges; the values live in the YAML
files (see tasks/engine/config/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.config.command_options import CommandOptions, option
from tasks.engine.config.schema import key

MAX_BEAM = 128  # a wider beam costs time and memory (keys per hypothesis) with no gain a user could want

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class RealCorpusConfig:
    """task.data.real: the corpus of the Debian packages' translations (tasks/corpora/parallel_corpus.py)."""
    sources: List[str] = key()
    libreoffice_help: str = key()
    gnome_help: str = key()
    fillets_scripts: str = key()
    dictionary_block_lines: int = key(low=1)
    min_words: int = key(low=1)
    max_words: int = key(low=1)
    valid_fraction: float = key(low=0, high=1)
    test_fraction: float = key(low=0, high=1)
    min_valid: int = key(low=0)
    min_test: int = key(low=0)
    max_pairs: Optional[Dict[str, Any]] = key()
    train_extra: Optional[Dict[str, Any]] = key()


@dataclass(kw_only=True)
class TranslationDataConfig:
    source: Literal["real", "dictionary", "files", "hub"]
    real: Optional[RealCorpusConfig] = key()
    dictionary_path: Optional[str] = key()
    cache_dir: Optional[str] = key()
    min_words: int = key(low=1)
    max_words: int = key(low=1)
    valid_size: int = key(low=1)
    test_size: int = key(low=1)
    split_seed: int = key(low=0)
    files: Optional[Dict[str, Any]] = key()
    hub_name: Optional[str] = key()
    hub_config: Optional[str] = key()
    hub_splits: Optional[Dict[str, Any]] = key()
    max_train_examples: Optional[int] = key(low=1)


@dataclass(kw_only=True)
class SubwordConfig:
    model_type: Literal["unigram", "bpe"]
    vocab_size: int = key(low=300)     # 256 byte-fallback pieces + the specials + the characters (+ 10 number placeholders)
    character_coverage: float = key(low=0, high=1, low_open=True)
    max_sentences: int = key(low=1)


@dataclass(kw_only=True)
class DecodingConfig:
    valid_beam_size: int = key(low=1, high=MAX_BEAM)
    beam_size: int = key(low=1, high=MAX_BEAM)
    length_penalty: float = key(low=0)
    max_len_a: float = key(low=0)
    max_len_b: int = key(low=1)


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
    label_smoothing: float = key(**Rate)
    show_samples: int = key(low=0)   # random test sentences printed at the end of the run
    number_placeholders: bool = key()   # numbers as placeholders through the model (numbers.py)


@dataclass(kw_only=True)
class SRUSublayerConfig:
    mode: Literal["none", "replace_ffn", "before_ffn"]
    num_layers: int = key(low=1)
    dropout: float = key(**Rate)
    rnn_dropout: float = key(**Rate)
    highway_bias: float = key()
    rescale: bool = key()
    projection_size: int = key(low=0)
    encoder_bidirectional: bool = key()


@dataclass(kw_only=True)
class TransformerConfig:
    name: Literal["transformer", "transformer_sru"]
    sru: SRUSublayerConfig
    d_model: int = key(low=1)
    attention_heads: int = key(low=1)
    ffn_dim: int = key(low=1)
    encoder_layers: int = key(low=1)
    decoder_layers: int = key(low=1)
    norm: Literal["pre", "post"] = key()
    dropout: float = key(**Rate)
    attention_dropout: float = key(**Rate)
    activation_dropout: float = key(**Rate)
    share_all_embeddings: bool = key()
    share_decoder_input_output_embed: bool = key()
    max_positions: int = key(low=2)


@dataclass(kw_only=True)
class TranslationPredictOptions(CommandOptions):
    """predict.py's options of a translation model (docs/inference.md#options); None: the test's decoding."""
    batch_size: Optional[int] = option(None, low=1, help="sources per batch at most (None: "
                                                         "task.eval_max_sentences, as the evaluation batches)")
    beam: Optional[int] = option(None, low=1, high=MAX_BEAM, help="beam width (None: task.decoding.beam_size)")
    nbest: int = option(1, low=1, allowed="an integer from 1 to beam", help="hypotheses written per source, "
                                                                             "with their scores")
    length_penalty: Optional[float] = option(None, low=0, help="length penalty (None: "
                                                               "task.decoding.length_penalty)")

    def check(self, task_cfg: TranslationConfig) -> None:
        beam = self.beam or task_cfg.decoding.beam_size
        if self.nbest > beam:
            raise ValueError(f"nbest={self.nbest}: expected an integer from 1 to beam={beam} (that many hypotheses "
                             f"exist); raise beam= or lower nbest=")
