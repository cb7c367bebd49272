"""Span edges at named entities: an answer that cuts a name ends where the name ends.

    start, end = entity_edges(tags, start, end, sentence_ends)   # "Gustave" -> "Gustave Eiffel"
    start, end = without_asked_noun(question_words, context_words, start, end)   # "28 years" -> "28"

Why: the reader scores a span's start and end separately, and on people's questions it sometimes stops inside a
name ("Who is the telescope named after?" -> "Edwin" for "Edwin Hubble", "Queen Isabella" for "Queen Isabella
I"), which a person underlining the answer never does. Where the tagger marks the tokens as one entity (a run of
tokens with one entity type, tasks/squad/tagger.py), a span that starts or ends inside the run is widened to the
run's edge, never across a sentence's end and never to more than ``max_len`` tokens. A span that holds no entity
token at its edges is kept as decoded. Likewise "For how many years did the wall stand?" asks for the number, so
"28 years" ends before the noun the question already gives ("28"), as SQuAD's answers and the generator's do.
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


def without_asked_noun(question_words: Sequence[str], context_words: Sequence[str], start: int,
                       end: int) -> Tuple[int, int]:
    """(start, end) without a last token that is the noun of the question's "how many <noun>" (or its singular)."""
    words = [w.lower() for w in question_words]
    nouns = {words[k + 2] for k in range(len(words) - 2) if words[k] == "how" and words[k + 1] == "many"}
    nouns |= {n[:-1] for n in nouns if n.endswith("s")}
    if end > start and context_words[end].lower() in nouns:
        return start, end - 1
    return start, end
