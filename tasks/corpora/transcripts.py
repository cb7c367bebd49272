"""Transcripts in one normal form for every speech corpus: lowercase letters of the corpus's alphabet, space
and apostrophe.

    normalize_transcript("Don't STOP, 42!")                -> "don't stop"
    normalize_transcript("Příčina, ŽE?", alphabet="cs+nl") -> "příčina že"
    letters("cs+nl")                                        -> a-z, then the Czech and Dutch letters

Alphabets are fixed lists (not built from data), so checkpoints of one alphabet stay compatible whatever
the corpus or language selection: the voice-pack corpus uses "cs+nl" whether one or both languages train.
The corpus builders write their manifests in this form; tasks/speech/text.py builds CTC's vocabulary on it.
"""
from __future__ import annotations

import re
import string
import unicodedata

# Letters beyond a-z of each language (lowercase, NFC). Czech: the 15 of its alphabet; Dutch: the accents
# its spelling uses (diaeresis for vowel breaks as in "ruïne", acute for stress, loanword accents).
EXTRA_LETTERS = {"en": "", "cs": "áčďéěíňóřšťúůýž", "nl": "àáâäçèéêëíîïóôöúûü"}
ALPHABETS = {"en": ("en",), "cs+nl": ("cs", "nl")}


def letters(alphabet: str = "en") -> str:
    """a-z then the languages' extra letters in first-seen order."""
    if alphabet not in ALPHABETS:
        raise ValueError(f"speech alphabet: expected one of {list(ALPHABETS)}, received {alphabet!r}")
    extra = "".join(EXTRA_LETTERS[lang] for lang in ALPHABETS[alphabet])
    return string.ascii_lowercase + "".join(dict.fromkeys(c for c in extra if c not in string.ascii_lowercase))


def _outside(alphabet: str) -> "re.Pattern[str]":
    return re.compile(f"[^{re.escape(letters(alphabet))}' ]+")


_PATTERNS = {name: _outside(name) for name in ALPHABETS}


def normalize_transcript(text: str, alphabet: str = "en") -> str:
    """NFC, lowercase, typographic apostrophes to ', drop every character outside the alphabet (digits,
    punctuation become a word break), strip quote marks around words, and squeeze spaces, so references
    and hypotheses are compared in one form."""
    text = unicodedata.normalize("NFC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    words = _PATTERNS[alphabet].sub(" ", text).split()
    # 'quoted' words lose their quotes; Dutch 's / 't / zo'n keep their apostrophe
    words = [w.strip("'") if w.startswith("'") and w.endswith("'") else w for w in words]
    return " ".join(w for w in words if w.strip("'"))
