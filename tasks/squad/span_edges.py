"""Span edges at named entities: an answer that cuts a name ends where the name ends.

    start, end = entity_edges(tags, start, end, sentence_ends)   # "Gustave" -> "Gustave Eiffel"

Why: the reader scores a span's start and end separately, and on people's questions it sometimes stops inside a
name ("Who is the telescope named after?" -> "Edwin" for "Edwin Hubble", "Queen Isabella" for "Queen Isabella
I"), which a person underlining the answer never does. Where the tagger marks the tokens as one entity (a run of
tokens with one entity type, tasks/squad/tagger.py), a span that starts or ends inside the run is widened to the
run's edge, never across a sentence's end and never to more than ``max_len`` tokens. A span that holds no entity
token at its edges is kept as decoded.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from torch import Tensor


def entity_edges(tags: Optional[Tensor], start: int, end: int, sentence_ends: Sequence[bool] = (),
                 max_len: int = 15) -> Tuple[int, int]:
    """(start, end) inclusive token indices widened to the edges of the entities they cut."""
    if tags is None:
        return start, end
    ner = tags[:, 0].tolist()
    if not (0 <= start <= end < len(ner)):
        return start, end
    ends = list(sentence_ends) + [False] * (len(ner) - len(sentence_ends))
    s, e = start, end
    while ner[s] and s > 0 and ner[s - 1] == ner[s] and not ends[s - 1]:
        s -= 1
    while ner[e] and e + 1 < len(ner) and ner[e + 1] == ner[e] and not ends[e]:
        e += 1
    if e - s + 1 > max_len:
        return start, end
    return s, e
