"""Tokenizer and vocabulary for sentence classification (project-made; no torchtext).

The tokenizer follows the spirit of Kim (2014)'s ``clean_str`` that the SRU paper's classification scripts
use: keep letters, digits and a little punctuation, split clitics ("don't" -> "do n't") and punctuation
off words, collapse whitespace, lowercase.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

_DROP = re.compile(r"[^A-Za-z0-9(),!?'`]")      # anything else becomes a space
_CLITIC = re.compile(r"(n't|'s|'ve|'re|'d|'ll|'m)\b", re.IGNORECASE)
_PUNCT = re.compile(r"([,!?()])")
_SPACES = re.compile(r"\s+")


def tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Split a sentence into tokens the way the paper's classification scripts clean text."""
    text = _DROP.sub(" ", text)
    text = _CLITIC.sub(r" \1", text)
    text = _PUNCT.sub(r" \1 ", text)
    text = _SPACES.sub(" ", text).strip()
    if lowercase:
        text = text.lower()
    return text.split(" ") if text else []


class Vocabulary:
    """Token <-> id map. Id 0 is padding, id 1 the unknown token; the rest by descending frequency
    (ties broken alphabetically so the same corpus always gives the same ids)."""

    PAD, UNK = "<pad>", "<unk>"

    def __init__(self, tokens: Sequence[str]):
        self.itos = [self.PAD, self.UNK] + [t for t in tokens if t not in (self.PAD, self.UNK)]
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("Vocabulary tokens must be unique")

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def unk_id(self) -> int:
        return 1

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None):
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, received {min_freq}")
        counts = Counter(tok for sent in sentences for tok in sent)
        ranked = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[:max_size]
        return cls(ranked)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, self.unk_id) for t in tokens]

    def __len__(self) -> int:
        return len(self.itos)

    def state_dict(self) -> dict:
        return {"itos": list(self.itos)}

    @classmethod
    def from_state_dict(cls, state: dict) -> "Vocabulary":
        return cls(state["itos"][2:])
