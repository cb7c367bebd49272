"""Questions about where a thing is, by the kind of place, and about whose work a thing is:

    kind of place   "The tower is a lattice tower on the Champ de Mars in Paris."  -> "In which city is the tower?"
                    "Lake Baikal is a rift lake in southern Siberia, Russia."       -> "In which country is Lake Baikal?"
    whose + noun    "Beethoven set Schiller's poem to music."                        -> "Whose poem did Beethoven set to music?"

A description ("X is a ... in Y") names places nested inside one another; a person asking "In which city"
wants the city, not the square or the region, so the answer is the place of the asked kind wherever it sits
in the phrase. The kinds come from question_words.py's tables (countries, cities, US states, continents,
mountain ranges).
"""
from __future__ import annotations

from typing import List

from .parse_spans import answer_range, subtree_range
from .question_words import UNRESOLVED, place_kind

LOCATING_PREPS = {"in", "on", "at", "near", "within"}


def comma_conj(tok) -> bool:
    """"Madrid, Spain" parsed as a conjunct: the place after a comma, not one of "Bolivia and Peru"."""
    return tok.dep_ == "conj" and tok.i > 0 and tok.doc[tok.i - 1].text == ","


def _place_of(tok):
    """The token's place entity range when the token names a place inside a locating phrase (the object of
    "in" / "on" ..., or an apposition / conjunct of one: "Siberia, Russia")."""
    if tok.ent_type_ not in ("GPE", "LOC") or tok.ent_iob_ != "B" and tok.dep_ != "pobj":
        return None
    anchor = tok
    while (anchor.dep_ in ("appos", "compound") or comma_conj(anchor)) and anchor.head.ent_type_ in (
            "GPE", "LOC", "FAC", ""):
        anchor = anchor.head
    while anchor.dep_ == "pobj" and anchor.head.lower_ == "of" and anchor.head.head.dep_ == "pobj":
        anchor = anchor.head.head  # "in the centre of Madrid": the place inside a locating phrase
    if anchor.dep_ != "pobj" or anchor.head.lower_ not in LOCATING_PREPS:
        return None
    return answer_range(tok)


def place_questions(sq) -> List:
    """"X is a <description> ... in <city / country>": "In which city is X?" (copular sentences only)."""
    if sq.root.lemma_ != "be" or sq.subject_text is None or sq.subject.lower_ in UNRESOLVED - {"he", "she", "it"}:
        return []
    out, seen = [], set()
    subject = set(sq.subject_range)
    for tok in sq.sent:
        if tok.i in subject or tok.i < sq.root.i:
            continue
        rng = _place_of(tok)
        if rng is None or rng.start in seen:
            continue
        seen.add(rng.start)
        kind = place_kind(sq.doc[rng.start:rng.stop].text)
        if kind is None:
            continue
        question = f"in which {kind} {sq.root.text.lower()} {sq.subject_text}?"
        out.append(sq._make(question, rng, "which", sq.doc[rng.start].ent_type_))
    return out


def whose_questions(sq) -> List:
    """"Beethoven set Schiller's poem to music" -> "Whose poem did Beethoven set to music?" (answer Schiller)."""
    out = []
    for obj in sq.root.children:
        if obj.dep_ != "dobj" or obj.pos_ != "NOUN":
            continue
        owner = next((c for c in obj.children if c.dep_ == "poss" and c.pos_ == "PROPN"), None)
        if owner is None or any(c.dep_ in ("amod", "nummod") for c in obj.children):
            continue
        nouns = [c.lower_ for c in obj.children if c.dep_ == "compound" and c.i < obj.i] + [obj.lower_]
        question = sq._inverted(f"whose {' '.join(nouns)}", set(subtree_range(obj)))
        rng = answer_range(owner)
        rng = range(rng.start, rng.stop - (sq.doc[rng.stop - 1].dep_ == "case"))
        out.append(sq._make(question, rng, "whose", "PERSON"))
    return out
