"""The answer-type match feature: does a paragraph token's entity type fit what the question asks for?

    types = expected_types(["how", "long", "is", "the", "danube", "?"])   # {"QUANTITY", "CARDINAL", ...}
    column = type_match_column(tags, types)                                # (Lp, 1) float32, 1 on a match

Why: the tagger features (tasks/squad/tagger.py) tell the reader each token's entity type, and the reader has
to learn from the generated questions which question asks for which type. It learns that well where the
generated corpus has many examples ("When" -> DATE: 1,299 questions) and poorly where it has few: the
Wikipedia and BBC prose gives about 180 "how long / how high" questions, 3 with a QUANTITY answer, so on the
hand-written check set the reader answered "How high is Mount Everest?" with "highest". One column shared by
every question kind ("this token is of the type the question asks for") is learned from all of them at once,
so that it may carry over to the rare kinds; measured, the column alone moved the check set within the
seed-to-seed noise, and the gain came from using it in span decoding (metrics.py: decode_spans, with
task.answer_type_prior; docs/results_squad.md). This is the answer-type matching of classic factoid QA systems (e.g.
Moldovan et al. 2000, "The structure and performance of an open-domain question answering system"), given
to the reader as one more token feature beside DrQA's.

The question's kind is read from its first words (lower-cased reader tokens): the wh-phrase may follow a
preposition ("In which country ...", "At what age ..."). A question with no rule ("What did Fleming
discover?") expects no type and its column is all zeros.
"""
from __future__ import annotations

from typing import FrozenSet, Sequence

import torch
from torch import Tensor

from .tagger import NER_LABELS

NUMBER = frozenset({"CARDINAL", "QUANTITY"})
DATE = frozenset({"DATE", "TIME"})
PLACE = frozenset({"GPE", "LOC", "FAC"})
# "how <adjective>" asks for a measure; a duration ("how long did the war last?") is a DATE entity
MEASURES = {"long", "high", "tall", "large", "big", "far", "deep", "wide", "heavy", "old", "fast", "hot", "cold"}
# the noun after "which" / "what" -> the entity types that name one
NOUN_TYPES = {
    "year": DATE, "date": DATE, "day": DATE, "month": DATE, "century": DATE, "decade": DATE, "time": DATE,
    "age": NUMBER | DATE,
    "country": PLACE, "city": PLACE, "town": PLACE, "state": PLACE, "continent": PLACE, "island": PLACE,
    "region": PLACE, "province": PLACE, "village": PLACE, "capital": PLACE, "river": PLACE, "sea": PLACE,
    "ocean": PLACE, "mountain": PLACE, "lake": PLACE, "place": PLACE,
    "nationality": frozenset({"NORP"}), "language": frozenset({"LANGUAGE", "NORP"}),
    "organization": frozenset({"ORG"}), "organisation": frozenset({"ORG"}), "company": frozenset({"ORG"}),
    "team": frozenset({"ORG"}), "party": frozenset({"ORG"}), "university": frozenset({"ORG"}),
    "percentage": frozenset({"PERCENT"}), "percent": frozenset({"PERCENT"}),
    "person": frozenset({"PERSON"}),
}
WORK, EVENT, BUILDING, PERSON = (frozenset({"WORK_OF_ART"}), frozenset({"EVENT", "LAW"}), frozenset({"FAC", "ORG"}),
                                 frozenset({"PERSON"}))
# works, events, buildings and people named by their kind: "Which treaty ...?", "In which museum ...?"
NOUN_TYPES.update({noun: WORK for noun in "poem painting novel book song album opera symphony play film".split()})
NOUN_TYPES.update({noun: EVENT for noun in "war battle revolution treaty mission event".split()})
NOUN_TYPES.update({noun: BUILDING for noun in "museum building bridge tower palace cathedral church stadium airport "
                                              "spaceport".split()})
NOUN_TYPES.update({noun: PERSON for noun in "emperor king queen artist architect writer composer painter".split()})
NOUN_TYPES.update({"range": PLACE, "mountains": PLACE, "gulf": PLACE, "bay": PLACE, "body": PLACE,
                   "agency": frozenset({"ORG"}), "coalition": frozenset({"ORG"}), "firm": frozenset({"ORG"})})
# "What is the total length of the Great Wall?": a measure named by its noun
MEASURE_NOUNS = {"length", "height", "area", "population", "size", "width", "depth", "distance", "weight",
                 "elevation", "altitude", "speed", "temperature", "cost", "price"}
# skipped between "what" and the noun that says what is asked: "What is the capital of Japan?"
LINKING = {"is", "was", "are", "were", "the", "a", "an", "total"}
LEADING_PREPOSITIONS = {"in", "into", "at", "on", "from", "to", "by", "for", "during", "of", "with", "through",
                        "near", "along", "since", "until", "after", "before"}
_NER_ID = {label: i for i, label in enumerate(NER_LABELS)}


def expected_types(question_words: Sequence[str]) -> FrozenSet[str]:
    """The entity types that answer a question, from its lower-cased tokens; empty when no rule applies."""
    words = [w.lower() for w in question_words]
    k = 0
    while k < len(words) - 1 and words[k] in LEADING_PREPOSITIONS and k < 2:
        k += 1
    head, nxt = words[k] if k < len(words) else "", words[k + 1] if k + 1 < len(words) else ""
    if head == "how":
        if nxt in ("many", "much"):
            return NUMBER | frozenset({"MONEY", "PERCENT"})
        if nxt in ("old", "long"):  # an age or a year; a length or a duration
            return NUMBER | DATE
        return NUMBER if nxt in MEASURES else frozenset()
    if head == "when":
        return DATE
    if head in ("who", "whom", "whose"):
        return frozenset({"PERSON", "ORG", "NORP"})
    if head == "where":
        return PLACE
    if head in ("which", "what"):
        j = k + 1
        while j < len(words) and j <= k + 4 and words[j] in LINKING:
            j += 1
        noun = words[j] if j < len(words) else ""
        return NUMBER if noun in MEASURE_NOUNS else NOUN_TYPES.get(noun, frozenset())
    return frozenset()


def type_match_column(tags: Tensor, types: FrozenSet[str]) -> Tensor:
    """(Lp, 2) [NER id, POS id] tags -> (Lp, 1) float32: 1 where the token's entity type is in ``types``."""
    ids = torch.tensor(sorted(_NER_ID[t] for t in types), dtype=torch.long)
    return torch.isin(tags[:, 0].long(), ids).float().unsqueeze(1)
