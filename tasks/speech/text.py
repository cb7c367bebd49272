"""Transcripts as characters: lowercase letters of the corpus's alphabet, space and apostrophe; CTC's
blank is id 0. The normal form (``normalize_transcript``, ``letters``) lives in tasks/corpora/transcripts.py,
which the corpus builders write their manifests in.

    normalize_transcript("Don't STOP, 42!")                -> "don't stop"
    normalize_transcript("Příčina, ŽE?", alphabet="cs+nl") -> "příčina že"
    vocab = char_vocabulary()                -> <blank> <unk> ' ' "'" a ... z  (blank = 0)
    vocab = char_vocabulary("cs+nl")         -> the same, then the Czech and Dutch letters with diacritics

Alphabets are fixed lists (not built from data), so checkpoints of one alphabet stay compatible whatever
the corpus or language selection: the voice-pack corpus uses "cs+nl" whether one or both languages train.
"""
from __future__ import annotations

from tasks.common.text import UNK, Vocabulary
from tasks.corpora.transcripts import letters

BLANK = "<blank>"
ALPHABETS = ("en", "cs+nl")  # task.data.alphabet's values


def char_vocabulary(alphabet: str = "en") -> Vocabulary:
    vocab = Vocabulary([" ", "'"] + list(letters(alphabet)), specials=(BLANK, UNK))
    assert vocab.stoi[BLANK] == 0  # F.ctc_loss(blank=0) and the decoders rely on it
    return vocab
