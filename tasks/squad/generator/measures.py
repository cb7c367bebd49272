"""Questions about measures and time boundaries, the kinds people ask of encyclopaedic prose:

    verb + measure     "Mont Blanc rises 4,808 metres above sea level."  -> "How high does Mont Blanc rise ...?"
                       "The Volga flows for 3,530 kilometres."          -> "How long does the Volga flow?"
    measure noun       "Lake Superior has a maximum depth of 406 metres." -> "How deep is Lake Superior?"
    distance           "The village lies 20 kilometres north of Oxford." -> "How far does the village lie north of Oxford?"
    boundary (conj)    "The war began in 1618 and ended in 1648."       -> "When did the war end?" (1648)
    boundary (span)    "The reign lasted from 1837 to 1901."             -> "When did the reign begin / end?"

The answer is the measure with its unit ("4,808 metres", never "a maximum depth of 406 metres") or the date
alone, so the reader learns to underline the span a person would. Each builder takes the sentence's
SentenceQuestions (natural_questions.py) and returns its candidates.
"""
from __future__ import annotations

import re
from typing import List, Optional

from .parse_spans import answer_range, subtree_range
from .question_words import DO_SUPPORT, UNRESOLVED

# a verb that gives a measure as its object or after "for" / "to" -> the "how" adjective asking for it
VERB_MEASURES = {"rise": "high", "stand": "high", "tower": "high", "reach": "high", "climb": "high",
                 "flow": "long", "run": "long", "stretch": "long", "extend": "long", "span": "long",
                 "travel": "far", "fly": "far", "cover": "large", "weigh": "heavy", "sink": "deep", "dive": "deep"}
# "X covers 8,983 square kilometres" reads as "How large is X?", not "How large does X cover?"
COPULA_MEASURES = {"cover"}
# "a height of 330 metres": the noun naming the measure -> the "how" adjective
NOUN_MEASURES = {"height": "high", "elevation": "high", "altitude": "high", "depth": "deep", "length": "long",
                 "distance": "long", "area": "large", "width": "wide", "weight": "heavy", "span": "long"}
# verbs whose "from X to Y" dates bound a period: "from" answers when it began, "to" / "until" when it ended
PERIOD_VERBS = {"last", "run", "reign", "rule", "serve", "continue", "exist", "operate", "live"}
BEGIN_PREPS, END_PREPS = {"from"}, {"to", "until", "till"}


def quantity_range(tok) -> Optional[range]:
    """The measure entity holding ``tok`` when it ends in a unit word ("5,895 metres", not "1,000")."""
    if tok.ent_type_ not in ("QUANTITY", "CARDINAL"):
        return None
    rng = answer_range(tok)
    last = tok.doc[rng.stop - 1]
    if not last.is_alpha or last.like_num or not any(tok.doc[i].like_num for i in rng):
        return None
    return rng


def _measure_in(tok) -> Optional[range]:
    """A measure as ``tok`` itself (object, adverbial noun) or as the object of its "for" / "to" phrase."""
    if tok.dep_ in ("dobj", "npadvmod", "attr"):
        return quantity_range(tok)
    if tok.dep_ == "prep" and tok.lower_ in ("for", "to", "over"):
        pobj = next((c for c in tok.children if c.dep_ == "pobj"), None)
        return None if pobj is None else quantity_range(pobj)
    return None


def measure_questions(sq) -> List:
    out = []
    root = sq.root
    adjective = VERB_MEASURES.get(root.lemma_)
    for child in root.children:
        rng = _measure_in(child) if adjective else None
        if rng is not None and root.lemma_ in COPULA_MEASURES:
            question = None if sq.subject_text is None else f"how {adjective} {_be(sq)} {sq.subject_text}?"
            out.append(sq._make(question, rng, "how_measure", "QUANTITY"))
        elif rng is not None:
            out.append(sq._make(sq._inverted(f"how {adjective}", set(subtree_range(child))), rng,
                                "how_measure", "QUANTITY"))
        far = _distance_in(child)  # "rises 4,808 metres above sea level": the verb's own measure
        if far is not None:
            out.append(sq._make(sq._inverted(f"how {adjective or 'far'}", set(subtree_range(far))),
                                answer_range(far), "how_measure", "QUANTITY"))
    out += _measure_nouns(sq)
    return out


def _distance_in(child):
    """"lies 20 kilometres north of Oxford": the measure before a direction word or a place preposition."""
    if child.dep_ not in ("advmod", "prep"):
        return None
    measure = next((c for c in child.children if c.dep_ == "npadvmod" and c.i < child.i), None)
    return measure if measure is not None and quantity_range(measure) is not None else None


def _be(sq) -> str:
    past = sq.root.tag_ == "VBD" or any(a.lower_ in ("was", "were", "had") for a in sq.auxes)
    return "was" if past else "is"


def _measure_nouns(sq) -> List:
    """"X has a maximum depth of 1,642 metres" / "X, with a height of 828 metres, ..." -> "How deep is X?"."""
    if sq.subject_text is None or sq.subject.lower_ in UNRESOLVED - {"he", "she", "it"}:
        return []
    out = []
    for tok in sq.sent:
        adjective = NOUN_MEASURES.get(tok.lemma_.lower()) if tok.pos_ == "NOUN" else None
        of = next((c for c in tok.children if c.dep_ == "prep" and c.lower_ == "of"), None) if adjective else None
        pobj = None if of is None else next((c for c in of.children if c.dep_ == "pobj"), None)
        rng = None if pobj is None else quantity_range(pobj)
        if rng is None or sq.subject.i in subtree_range(tok):
            continue
        out.append(sq._make(f"how {adjective} {_be(sq)} {sq.subject_text}?", rng, "how_measure", "QUANTITY"))
    return out


def _is_date(tok) -> bool:
    return tok.ent_type_ == "DATE" or bool(re.fullmatch(r"1\d{3}|20\d{2}", tok.text))


def _date_side(rng: range, doc, preps) -> range:
    """One end of a date entity that holds both ("1837 to 1901"): before "to" for a beginning, after it for an end."""
    cut = next((i for i in rng if doc[i].lower_ in END_PREPS | {"-", "–"}), None)
    if cut is None:
        return rng
    return range(cut + 1, rng.stop) if preps is END_PREPS else range(rng.start, cut)


def _date_after(verb, preps) -> Optional[range]:
    for prep in verb.children:
        if prep.dep_ == "prep" and prep.lower_ in preps:
            pobj = next((c for c in prep.children if c.dep_ == "pobj"), None)
            if pobj is not None and _is_date(pobj):
                rng = _date_side(answer_range(pobj), verb.doc, preps)
                return rng if len(rng) else None
            inner = next((c for c in (pobj.children if pobj is not None else []) if c.dep_ == "prep"), None)
            if inner is not None and inner.lower_ in END_PREPS and preps is END_PREPS:
                return _date_after(pobj, END_PREPS)
    return None


def _when(verb, subject_text: str, aux) -> Optional[str]:
    """"When did the war end?" / "When was the line completed?" (the verb alone: its adjuncts are left out)."""
    if aux is not None and aux.lower_ in ("was", "were", "is", "are"):
        return f"when {aux.lower_} {subject_text} {verb.text}?"
    if verb.tag_ in DO_SUPPORT and aux is None:
        particle = "".join(f" {c.text}" for c in verb.children if c.dep_ == "prt")
        return f"when {DO_SUPPORT[verb.tag_]} {subject_text} {verb.lemma_}{particle}?"
    return None


def boundary_questions(sq) -> List:
    """When a period began or ended: a date in a coordinated clause ("... and ended in 1453") or the two ends of
    "from X to Y" after a verb of duration."""
    if sq.subject_text is None or sq.subject.lower_ in UNRESOLVED - {"he", "she", "it"}:
        return []
    out = []
    for verb in [sq.root] + [c for c in sq.root.children if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX")]:
        own = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if verb is not sq.root and own is None and any(c.dep_ in ("dobj", "attr") for c in verb.children):
            continue
        if own is not None and verb is not sq.root:
            continue  # a clause with its own subject is asked about as a sentence of its own would be
        aux = next((c for c in verb.children if c.dep_ in ("aux", "auxpass")), None)
        if verb is not sq.root:
            date = _date_after(verb, {"in", "on", "at"})
            question = _when(verb, sq.subject_text, aux) if date is not None else None
            if question:
                out.append(sq._make(question, date, "time_boundary", "DATE"))
        if verb.lemma_ in PERIOD_VERBS:
            for preps, word in ((BEGIN_PREPS, "begin"), (END_PREPS, "end")):
                date = _date_after(verb, preps)
                if date is not None:
                    tense = "did" if verb.tag_ == "VBD" else "does"
                    out.append(sq._make(f"when {tense} {sq.subject_text} {word}?", date, "time_boundary", "DATE"))
    return out
