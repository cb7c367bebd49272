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

from .tagger import NER_LABELS, POS_LABELS


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


# "the age of 21" for "How old ...?", "a height of 330 metres" for "How tall ...?": the relation's head is not the
# answer (the generator's answers stop there too: generator/parse_spans.py RELATION_HEADS)
AGE_QUESTION = ("how old", "what age")
MEASURE_HEADS = {"distance", "height", "depth", "length", "width", "area", "elevation", "altitude", "total"}
RELATIVE = {"which", "who", "whom", "whose", "that", "where"}
NAMING = {"called", "named", "known"}
# a person underlines a noun phrase: it does not end on these (nor start on the first three)
LOOSE_START = {"ADP", "CCONJ", "SCONJ"}
LOOSE_END = LOOSE_START | {"AUX", "DET", "PRON"}


def _pos(tags: Tensor, k: int) -> str:
    return POS_LABELS[int(tags[k, 1])]


def _ner(tags: Tensor, k: int) -> str:
    return NER_LABELS[int(tags[k, 0])]


def without_relation_head(question_words: Sequence[str], context_words: Sequence[str], start: int,
                          end: int) -> Tuple[int, int]:
    """"the age of 21" -> "21" for an age question, "a distance of 3 kilometres" -> "3 kilometres" for a measure."""
    question = " ".join(w.lower() for w in question_words)
    heads = ({"age"} if any(q in question for q in AGE_QUESTION) else set()) | (
        MEASURE_HEADS if question.startswith("how ") or " how " in question else set())
    words = [w.lower() for w in context_words]
    k = start + (words[start] in ("the", "a", "an"))
    if k + 2 <= end and words[k] in heads and words[k + 1] == "of":
        return k + 2, end
    return start, end


def without_run_on(context_words: Sequence[str], tags: Optional[Tensor], start: int, end: int) -> Tuple[int, int]:
    """A span cut before a clause that runs on past its noun phrase: ", printed in the 1450s" or a relative
    clause ("third figure whose works ..." -> "third figure"); "called Penicillium" -> "Penicillium"; no
    preposition, conjunction, auxiliary, article or pronoun at its ends ("Penicillium had" -> "Penicillium")."""
    if tags is None:
        return start, end
    words = [w.lower() for w in context_words]
    for k in range(start + 1, end + 1):
        clause = words[k] == "," and k < end and (_pos(tags, k + 1) == "VERB" or words[k + 1] in RELATIVE)
        relative = words[k] in RELATIVE and _pos(tags, k - 1) in ("NOUN", "PROPN") and not _ner(tags, k)
        if clause or relative:
            end = k - 1
            break
    if words[start] in NAMING and start < end:
        start += 1 + (words[start] == "known" and words[start + 1] == "as" and start + 1 < end)
    while end > start and _pos(tags, end) in LOOSE_END and not _ner(tags, end):
        end -= 1
    while end > start and _pos(tags, start) in LOOSE_START and not _ner(tags, start):
        start += 1
    return start, end
