"""Transcripts as characters: lowercase letters, space and apostrophe; CTC's blank is id 0.

    normalize_transcript("Don't STOP, 42!")  -> "don't stop"
    vocab = char_vocabulary()                -> <blank> <unk> ' ' "'" a ... z  (blank = 0)
"""
from __future__ import annotations

import re
import string

from tasks.common.text import UNK, Vocabulary

BLANK = "<blank>"
CHARS = [" ", "'"] + list(string.ascii_lowercase)
_OUTSIDE = re.compile(r"[^a-z' ]+")


def normalize_transcript(text: str) -> str:
    """Lowercase, drop every character outside the set (digits, punctuation become a word break), and
    squeeze spaces, so references and hypotheses are compared in one form."""
    return " ".join(_OUTSIDE.sub(" ", text.lower()).split())


def char_vocabulary() -> Vocabulary:
    """A fixed character set (not built from data): checkpoints of different corpora stay compatible."""
    vocab = Vocabulary(CHARS, specials=(BLANK, UNK))
    assert vocab.stoi[BLANK] == 0  # F.ctc_loss(blank=0) and the decoders rely on it
    return vocab
