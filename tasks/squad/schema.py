"""Schema of ``task=squad`` (conf/task/squad.yaml): types and ranges; the values live in the YAML file
(see tasks/engine/config/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.config.command_options import CommandOptions, option
from tasks.engine.config.schema import SplitPaths, key

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class SquadDataConfig:
    source: Literal["generated", "files", "hub"]
    files: SplitPaths = key()            # test: null -> the valid file
    hub_name: str = key()
    hub_config: Optional[str] = key()
    hub_splits: Dict[str, Any] = key()
    cache_dir: Optional[str] = key()
    wiki_path: Optional[str] = key()
    prose: List[Literal["wiki", "bbc"]] = key()
    seed: int = key(low=0)
    split_fractions: List[float] = key(low=0, low_open=True, length=3)
    max_context_words: int = key(low=1)
    questions_per_context: int = key(low=1)
    max_context_tokens: Optional[int] = key(low=1)
    max_train_examples: Optional[int] = key(low=1)


@dataclass(kw_only=True)
class SquadEmbeddingConfig:
    dim: int = key(low=1)
    path: Optional[str] = key()
    format: Literal["auto", "text", "binary"] = key()
    tune_partial: int = key(low=0)


@dataclass(kw_only=True)
class SquadConfig:
    name: Literal["squad"]
    data: SquadDataConfig
    embedding: SquadEmbeddingConfig
    batch_size: int = key(low=1)
    eval_batch_size: int = key(low=1)
    max_answer_len: int = key(low=1)
    lowercase: bool = key()
    min_freq: int = key(low=1)
    max_vocab: Optional[int] = key(low=2)
    emb_dropout: float = key(**Rate)
    word_dropout: float = key(**Rate)   # training: the share of words read as <unk> (task.py: _unknown_words)
    synonyms: bool = key()   # a lemma-or-synonym match column from WordNet (features.py; apt wordnet-base)
    synonym_questions: float = key(**Rate)   # with synonyms: the share of training questions copied with a synonym
    human_check: Optional[str] = key()
    tagger: Optional[Literal["spacy_en_md"]] = key()   # POS + NER token features (tasks/squad/tagger.py); null: none
    readers: int = key(low=1)   # readers trained side by side, answering together (model.py: ReaderEnsemble)
    answer_type_match: bool = key()   # with a tagger: a column marking tokens of the asked entity type (answer_types.py)
    answer_type_prior: float = key(low=0)   # decoding: log-prob bonus of a span boundary on the asked type (metrics.py)
    span_edges: bool = key()   # decoding: a span cutting a name widened to it, no "how many" noun (span_edges.py)
    answer_kinds: bool = key()   # decoding: the prior only on the asked kind (city, country, measure...; answer_kinds.py)
    where_when_prior: float = key(low=0)   # decoding, with answer_kinds: a "where" / "when" question's prior
    encoder: Optional[Dict[str, Any]] = key()   # model.* keys written over cfg.model (checked with it)


@dataclass(kw_only=True)
class SquadPredictOptions(CommandOptions):
    """predict.py's options of a question answering model (docs/inference.md#options)."""
    batch_size: Optional[int] = option(None, low=1, help="inputs per batch (None: task.eval_batch_size, as "
                                                         "the evaluation batches)")
