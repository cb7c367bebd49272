"""The kind of thing a question asks for, finer than its entity type, for span decoding.

    mask = kind_mask(question_words, context_words, tags, type_column)   # (Lp,) bool: where the prior applies

Why: the answer-type prior (metrics.py: decode_spans) lifts spans on tokens of the asked entity type, but an
entity type is coarse where people ask by kind. "In which city is the Eiffel Tower?" asks for a GPE, and so
do "France" and "Europe" beside "Paris"; "How tall is the tower?" asks for a measure, and "three levels" is a
CARDINAL as much as "330 metres" is a QUANTITY; "Into which ocean ...?" asks for a LOC, and so is "South
America". Where the question names a kind this module recognises and the paragraph holds an entity of that
kind, only that entity's tokens keep the prior; otherwise the type column is used as it is. The reader's own
input (the type column, a feature the model was trained with) is not changed, so a trained model decodes
with it without retraining.

Kinds (the question's lower-cased words; an entity is a run of tokens with one entity type):
- a measure ("how tall / high / far / deep / wide / large / heavy", "how long is", "what is the length of")
  -> QUANTITY entities (a number with its unit); "how long did X last / take" -> DATE / TIME (a duration);
- "which city / town" -> a place that is not a country, continent or US state (the generator's tables);
  "which country" -> a country of the table; "which continent" -> a continent; "which state" -> a US state;
- "which ocean / sea / river / lake / desert / island / mountain / bay / canal" -> a place whose name holds
  that word ("the Atlantic Ocean", "the Rhine River");
- "where" -> a place entity, or a proper noun right after "in / from / at / near" that the tagger left
  untyped or called an organisation (spaCy's en_core_web_md tags "born in Pisa" and "from Genoa" as ORG);
- "when" / "in what year" -> a date that names a point in time ("1519", not "his final years" nor "10-day"), or
  an event after "during / before / after" ("during the Second World War"); with an end verb ("when did the war
  end?") not the first date of a range ("from 1618 to 1648"), with a begin verb not its second (a date run the
  tagger made one entity is split at "to / until / and");
- "who / whom / whose" -> a person, organisation or group; "which treaty / poem / mission ..." -> the name that
  holds the noun or stands beside it ("the Treaty of Versailles", "the poem Ode to Joy", "the Apollo 11 mission").
An entity the question itself names is never its kind ("Whose poem did Beethoven set?": not Beethoven).
"""
from __future__ import annotations

import re
from typing import List, Optional, Sequence, Set, Tuple

import torch
from torch import Tensor

from .generator.question_words import CONTINENTS, COUNTRIES, US_STATES
from .tagger import NER_LABELS, POS_LABELS

MEASURE_WORDS = {"tall", "high", "far", "deep", "wide", "large", "big", "heavy", "thick"}
MEASURE_NOUNS = {"length", "height", "area", "width", "depth", "distance", "weight", "elevation", "altitude"}
DURATION_VERBS = {"last", "lasted", "lasts", "take", "took", "takes", "reign", "reigned", "rule", "ruled", "serve",
                  "served", "run", "ran", "continue", "continued"}
NAMED_KINDS = {"ocean", "sea", "river", "lake", "desert", "island", "mountain", "bay", "canal", "gulf", "strait"}
PLACE_TYPES = {"GPE", "LOC", "FAC"}
PEOPLE = {"PERSON", "ORG", "NORP"}
KIND_OPENERS = {"which", "what"}
# works, events and buildings asked by their kind ("Which treaty ...?"): their name holds the noun or stands by it
NAMED_BY_KIND = set("poem painting novel book song album opera symphony play film war battle revolution treaty "
                    "mission museum building bridge tower palace cathedral church stadium airport ship expedition "
                    "spacecraft satellite rocket telescope dynasty empire".split())
LOCATIVE = {"in", "from", "at", "near"}
END_VERBS = {"end", "ended", "ends", "finish", "finished", "close", "closed", "stop", "stopped", "conclude",
             "concluded", "cease", "ceased"}
BEGIN_VERBS = {"begin", "began", "begins", "start", "started", "starts", "open", "opened", "commence",
               "commenced"}
RANGE_SPLIT = {"to", "until", "till", "and", "–"}  # and "-" between two numbers ("1939-1945", not "10-day")
AFTER_START = {"from", "between", "since"}  # the word before a range's first date
DURING = {"during", "before", "after", "since", "until"}  # an event named as a time
DURATION = re.compile(r"\d+ - (day|week|month|year|hour|minute)s?\b")  # "a 10-day festival": how long, not when


def _vague(words: List[str], pos: List[str]) -> bool:
    """A date that names no point in time: "his final years" (a pronoun's), "10-day" (a duration)."""
    return "PRON" in pos or bool(DURATION.search(" ".join(words)))


def _splits_range(lower: List[str], j: int) -> bool:
    """Is token j the "to" / "and" / dash between the two dates of a range?"""
    if lower[j] == "-":
        return 0 < j < len(lower) - 1 and lower[j - 1].isdigit() and lower[j + 1].isdigit()
    return lower[j] in RANGE_SPLIT


def entities(context_words: Sequence[str], tags: Tensor) -> List[Tuple[int, int, str, str]]:
    """(start, end exclusive, entity type, lower-cased text) of each run of tokens with one entity type."""
    ner = [NER_LABELS[int(i)] for i in tags[:, 0]]
    out, k = [], 0
    while k < len(ner):
        j = k + 1
        while j < len(ner) and ner[j] == ner[k]:
            j += 1
        if ner[k]:
            words = [w.lower() for w in context_words[k:j]]
            text = " ".join(words[1:] if words[0] == "the" else words)
            out.append((k, j, ner[k], text))
        k = j
    return out


def asked_noun(question_words: Sequence[str]) -> str:
    """The noun after the question's "which" / "what" ("In which city ..." -> "city"), or ""."""
    words = [w.lower() for w in question_words]
    for k, w in enumerate(words[:3]):
        if w in KIND_OPENERS and k + 1 < len(words):
            return words[k + 1]
    return ""


def _is_measure_question(words: List[str]) -> Optional[bool]:
    """True: a measure with a unit is asked; False: a duration; None: neither."""
    for k, w in enumerate(words[:-1]):
        if w == "how" and words[k + 1] in MEASURE_WORDS:
            return True
        if w == "how" and words[k + 1] == "long":
            return not (set(words) & DURATION_VERBS)
    if asked_noun(words) in {"is", "was"} and set(words[2:5]) & MEASURE_NOUNS:
        return True
    return None


def _fits(kind: str, etype: str, text: str) -> bool:
    if etype not in PLACE_TYPES:
        return False
    if kind in ("city", "town"):
        return text not in COUNTRIES and text not in CONTINENTS and text not in US_STATES and etype == "GPE"
    table = {"country": COUNTRIES, "continent": CONTINENTS, "state": US_STATES}.get(kind)
    if table is not None:
        return text in table
    return kind in text.split() or kind + "s" in text.split()


def _place_tokens(context_words: Sequence[str], tags: Tensor) -> Set[int]:
    """A "where" answer: the tokens of place entities and of proper nouns after a locative preposition that the
    tagger left untyped or called an organisation."""
    ner = [NER_LABELS[int(i)] for i in tags[:, 0]]
    pos = [POS_LABELS[int(i)] for i in tags[:, 1]]
    found = {k for k, t in enumerate(ner) if t in PLACE_TYPES}
    for k in range(1, len(ner)):
        if context_words[k - 1].lower() in LOCATIVE and pos[k] == "PROPN" and ner[k] in ("", "ORG"):
            j = k
            while j < len(ner) and pos[j] == "PROPN" and ner[j] == ner[k]:
                found.add(j)
                j += 1
    return found


def _time_tokens(question: List[str], context_words: Sequence[str], tags: Tensor) -> Set[int]:
    """A "when" answer: the dates that name a point in time, without the other boundary of a range when the
    question asks for its end or its start."""
    lower = [w.lower() for w in context_words]
    pos = [POS_LABELS[int(i)] for i in tags[:, 1]]
    points = []  # (first token, last token exclusive, "start" / "end" of a range or ""), ranges split at "to"
    for start, end, etype, _ in entities(context_words, tags):
        article = int(start > 0 and lower[start - 1] in ("the", "a"))  # the tagger may leave "the" out
        if etype == "EVENT" and start > article and lower[start - 1 - article] in DURING:  # "during the ... War"
            points.append((start, end, ""))
        if etype not in ("DATE", "TIME"):
            continue
        parts, k = [], start
        for j in range(start, end + 1):
            if j == end or _splits_range(lower, j):
                parts.append((k, j))
                k = j + 1
        for n, (k, j) in enumerate(parts):
            before = lower[k - 1] if k > 0 else ""
            first = len(parts) > 1 or before in AFTER_START
            role = "end" if n > 0 or before in RANGE_SPLIT else "start" if first else ""
            if j > k and not _vague(lower[k:j], pos[k:j]):
                points.append((k, j, role))
    asked = set(question)
    if asked & (END_VERBS | BEGIN_VERBS):
        other = "start" if asked & END_VERBS else "end"
        if any(role != other for _, _, role in points):
            points = [p for p in points if p[2] != other]
    return {t for k, j, _ in points for t in range(k, j)}


def _asks(words: List[str]) -> str:
    """ "where" / "when" when the question opens with it (or "in what / which year"), else ""."""
    if words[:1] == ["where"]:
        return "where"
    in_what_year = words[:1] == ["in"] and words[1:2] in (["what"], ["which"]) and words[2:3] == ["year"]
    if words[:1] == ["when"] or in_what_year:
        return "when"
    return ""


def asks_place_or_time(question_words: Sequence[str]) -> bool:
    """Does the question open with "where" / "when" / "in what year" (decoded with task.where_when_prior)?"""
    return bool(_asks([w.lower() for w in question_words]))


def kind_tokens(question_words: Sequence[str], context_words: Sequence[str], tags: Tensor) -> Optional[Set[int]]:
    """The paragraph tokens of the kind the question asks for; None when no kind rule applies or the paragraph
    has no entity of the kind (decoding then keeps the type column)."""
    words = [w.lower() for w in question_words]
    asks = _asks(words)
    if asks:
        found = _place_tokens(context_words, tags) if asks == "where" else _time_tokens(words, context_words, tags)
        return _not_named(found, words, context_words) or None
    measure, noun = _is_measure_question(words), asked_noun(words)
    if measure is None and noun in NAMED_BY_KIND:
        return _not_named(_named_by(noun, context_words, tags), words, context_words) or None
    found: Set[int] = set()
    for start, end, etype, text in entities(context_words, tags):
        hit = _entity_fits(words, measure, noun, etype, text)
        if hit is None:
            return None
        if hit and not set(text.split()) <= set(words):  # the answer is not what the question names
            found.update(range(start, end))
    return found or None


def _not_named(tokens: Set[int], question: List[str], context_words: Sequence[str]) -> Set[int]:
    """The tokens without the runs of them whose words the question holds ("Where did Columbus sail from Spain?":
    not Spain)."""
    out, run = set(), []
    for k in sorted(tokens) + [-2]:
        if run and k != run[-1] + 1:
            if not {context_words[i].lower() for i in run} <= set(question):
                out.update(run)
            run = []
        run.append(k)
    return out


def _named_by(noun: str, context_words: Sequence[str], tags: Tensor) -> Set[int]:
    """A work, event or building asked by its kind: a name that holds the noun ("the Treaty of Versailles" for
    "which treaty"), or a name right after or before it ("the poem Ode to Joy", "the Apollo 11 mission")."""
    lower = [w.lower() for w in context_words]
    pos = [POS_LABELS[int(i)] for i in tags[:, 1]]
    kinds = {noun, noun + "s"}
    names = [(a, b) for a, b, _, text in entities(context_words, tags)] + _proper_runs(pos)
    found: Set[int] = set()
    for a, b in names:
        holds = kinds & set(lower[a:b])
        beside = (a > 0 and lower[a - 1] in kinds) or (b < len(lower) and lower[b] in kinds)
        if holds or beside:
            found.update(range(a, b))
    return found


def _proper_runs(pos: List[str]) -> List[Tuple[int, int]]:
    """(start, end exclusive) of each run of proper nouns and the numbers after them ("Apollo 11": a name the
    tagger gave no entity type)."""
    runs, k = [], 0
    while k < len(pos):
        j = k
        while j < len(pos) and (pos[j] == "PROPN" or (j > k and pos[j] == "NUM")):
            j += 1
        if j > k:
            runs.append((k, j))
        k = j + 1
    return runs


def _entity_fits(words: List[str], measure: Optional[bool], noun: str, etype: str, text: str) -> Optional[bool]:
    """Is an entity of the asked kind? None: the question names no kind."""
    if measure is True:
        return etype == "QUANTITY"
    if measure is False:
        return etype in ("DATE", "TIME")
    if noun in ("city", "town", "country", "continent", "state") or noun in NAMED_KINDS:
        return _fits(noun, etype, text)
    if words[:1] in (["who"], ["whom"], ["whose"]):  # "Whose poem did Beethoven set?": a person, not Beethoven
        return etype in PEOPLE
    return None


def kind_mask(question_words: Sequence[str], context_words: Sequence[str], tags: Optional[Tensor],
              type_column: Tensor) -> Tensor:
    """(Lp,) bool: the tokens the answer-type prior lifts: the asked kind's where the paragraph has one, else the
    type column's."""
    broad = type_column.squeeze(1).bool()
    tokens = None if tags is None else kind_tokens(question_words, context_words, tags)
    if not tokens:
        return broad
    narrow = torch.zeros_like(broad)
    narrow[sorted(tokens)] = True
    return narrow
