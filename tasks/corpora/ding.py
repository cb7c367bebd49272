"""The Ding dictionary's line format (Debian ``trans-de-en``, /usr/share/trans/de-en): one entry a line,
``German :: English``; both sides are lists of parts separated by `` | `` that correspond one to one, and
each part lists alternatives separated by ``; ``. Shared by the ``dictionary`` source (data.py) and the
real corpus's dictionary documents (parallel_corpus.py)."""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any, List, Tuple

_ANNOTATION = re.compile(r"\s*(\{[^}]*\}|\[[^\]]*\]|<[^>]*>)")
_PARENS = re.compile(r"\s*\([^()]*\)")
_SPACES = re.compile(r"\s+")


def clean_part(text: str) -> str:
    """Drop Ding annotations ({m}, [Br.], <alt spelling>) and parenthesised explanations."""
    text = _ANNOTATION.sub("", text)
    text = _PARENS.sub("", text)
    return _SPACES.sub(" ", text).strip().strip(";").strip()


def pairs_from_ding_line(line: str, min_words: int) -> List[Tuple[str, str]]:
    """All (German, English) pairs of one dictionary line with >= ``min_words`` words on each side."""
    line = line.rstrip("\n")
    if line.startswith("#") or " :: " not in line:
        return []
    german, english = line.split(" :: ", 1)
    de_parts, en_parts = german.split(" | "), english.split(" | ")
    if len(de_parts) != len(en_parts):  # misaligned entry: skip rather than guess
        return []
    pairs = []
    for de_part, en_part in zip(de_parts, en_parts):
        de_alts = [clean_part(a) for a in de_part.split("; ")]
        en_alts = [clean_part(a) for a in en_part.split("; ")]
        if len(de_alts) != len(en_alts):
            de_alts, en_alts = de_alts[:1], en_alts[:1]
        for de, en in zip(de_alts, en_alts):
            if len(de.split()) >= min_words and len(en.split()) >= min_words:
                pairs.append((de, en))
    return pairs


def cache_key(*parts: Any) -> str:
    """A short stable hash of the settings and file stamps that make a cache folder."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]
