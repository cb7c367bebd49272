"""Tokenizer for sentence classification (project-made; no torchtext; the vocabulary is tasks/common/text.py).

The tokenizer follows the spirit of Kim (2014)'s ``clean_str`` that the SRU paper's classification scripts
use: keep letters, digits and a little punctuation, split clitics ("don't" -> "do n't") and punctuation
off words, collapse whitespace, lowercase.
"""
from __future__ import annotations

import re

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
