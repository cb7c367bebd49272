"""Questions as people write them, from a parsed sentence (spaCy: tags, dependencies, named entities).

    candidates = sentence_questions(sent, topics)     # [Candidate(question, answer_start, answer_end, ...)]

The answer is a span of the sentence chosen by its role in the parse and typed by NER; the question moves
the wh-phrase first and rebuilds the clause around it:

    subject       "Tim Berners-Lee invented the Web in 1989."  -> "Who invented the Web?"        (adjuncts drop)
    object        "Fleming discovered penicillin in 1928."     -> "What did Fleming discover in 1928?" (do-support)
    time / place  "Bach was born in Eisenach in 1685."         -> "When was Bach born?" / "Where was Bach born?"
                  (a country: "In which country was ...?"; a city, state or continent of question_words.py's
                  tables half the time "In which city ...?"; a year sometimes "In what year ...?")
    passive       "It was designed by Gustave Eiffel."         -> "Who designed the Eiffel Tower?"  (agent -> active)
    active        "Fleming discovered penicillin."             -> "Who was penicillin discovered by?" (-> passive)
    which + noun  "The Ming dynasty ruled China."              -> "Which dynasty ruled China?" (answer "Ming")
                  "The Danube flows into the Black Sea."      -> "Into which sea does the Danube flow?"
                  (a name ending in a CLASS_NOUNS word; the answer keeps it: "the Black Sea")
                  "Darwin sailed on the ship HMS Beagle."     -> "On which ship did Darwin sail?" (answer
                  "HMS Beagle": a name its sentence introduces with its kind, named_class.py)
    nationality   "Bach was a German composer."               -> "What nationality was Bach?"    (a NORP word)
    how many      "The tower has 3 levels."                    -> "How many levels does the tower have?"
    how tall/long "The river is 2,850 km long."                -> "How long is the river?"
                  "The war lasted for six years."             -> "How long did the war last?"

A subject pronoun ("He was born ...") is replaced by the nearest earlier named subject of the paragraph that
fits it (a person for he/she), so such a question needs the sentence before it. Relative clauses,
appositions, parentheses and coordinated clauses that do not hold the answer are left out. A candidate is
dropped when it keeps another pronoun, unbalanced brackets or quotes, contains its answer, is too short or
long, or reads as its sentence with only the answer replaced by a wh-word (question_checks.py).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set

from .measures import boundary_questions, measure_questions
from .named_class import named_class
from .places import place_questions, whose_questions
from .parse_spans import adjuncts, answer_range, answer_type, optional_parts, subtree_range
from .question_checks import words
from .question_words import (CLASS_NOUNS, DO_SUPPORT, DURATION_UNITS, MEASURE_ADJECTIVES, PARTICIPLE_OF_PAST,
                             PAST_OF_PARTICIPLE, UNRESOLVED, WH_FOR_TYPE, place_kind, third_person)

SUBJECT_DEPS = ("nsubj", "nsubjpass")
PLACE_PREPS = {"in", "at", "near", "on", "inside", "within"}
# asked only with "which + noun" ("Into which sea does the Danube flow?"; "Where does it flow into?" reads badly)
WHICH_PREPS = {"into", "across", "along", "through", "over", "under", "from", "to", "onto", "towards"}
TIME_PREPS = {"in", "on", "at", "during", "since", "until", "by", "after", "before", "from"}


@dataclass
class Candidate:
    question: str
    answer_start: int  # character offsets in the parsed document
    answer_end: int
    construction: str  # subject, object, time, place, passive_to_active, active_to_passive, which, how_many, how_measure, nationality, time_boundary, whose
    answer_type: str   # NER label or NP


def render(doc, indices: Iterable[int], replace: Optional[Dict[int, str]] = None) -> str:
    """The tokens in order with the text's own spacing between neighbours (one space across a gap),
    ``replace``d words substituted; stray commas at the ends or doubled are removed."""
    replace = replace or {}
    out, prev = "", None
    for i in sorted(set(indices)):
        tok = doc[i]
        text = replace.get(i, tok.text)
        if prev is not None:
            if prev == i - 1:
                out += doc[prev].whitespace_
            elif text not in (",", ";", ":", ".", "'s", "’s", ")"):
                out += " "
        out += text
        prev = i
    out = re.sub(r"\s+([,;:])", r"\1", out)
    out = re.sub(r"([,;:])(\s*[,;:])+", r"\1", out)
    return out.strip(" ,;:")


def phrase(doc, indices: Sequence[int], replace: Optional[Dict[int, str]] = None) -> str:
    """A noun phrase moved out of sentence-initial position: "The tower" -> "the tower" (names keep case)."""
    text = render(doc, indices, replace)
    first = doc[min(indices)] if indices else None
    if (first is not None and first.i == first.sent.start and first.pos_ != "PROPN" and text[:1].isupper()
            and first.i not in (replace or {})):
        text = text[0].lower() + text[1:]
    return text


class SentenceQuestions:
    """The candidates of one sentence (a spaCy Span); ``topics`` are earlier named subjects of the paragraph
    (most recent last) to resolve a pronoun subject."""

    def __init__(self, sent, topics: Sequence, rng: random.Random):
        self.sent, self.doc, self.rng = sent, sent.doc, rng
        self.root = sent.root
        self.subject = next((c for c in self.root.children if c.dep_ in SUBJECT_DEPS), None)
        self.auxes = [c for c in self.root.children if c.dep_ in ("aux", "auxpass") and c.i < self.root.i]
        self.names = self._possessives(topics)
        self.subject_text, self.subject_range = self._resolve_subject(topics)

    def _possessives(self, topics) -> Dict[int, str]:
        """"his" / "her" / "its" -> "Bach's" / "the tower's": the nearest earlier named subject that fits."""
        out = {}
        for tok in self.sent:
            if tok.dep_ == "poss" and tok.lower_ in ("his", "her", "its"):
                person = tok.lower_ != "its"
                own = [e for e in self.doc.ents if self.subject is not None and e.start <= self.subject.i < e.end
                       and self.subject.i < tok.i]  # "Bach married his cousin": his = the subject
                if own and (own[0].label_ == "PERSON") == person:
                    continue  # "Agassi renewed his contract": "When did Agassi renew his contract?"
                topic = next((t for t in reversed(topics) if (t.label_ == "PERSON") == person), None)
                if topic is not None:
                    out[tok.i] = topic.text + ("'" if topic.text.endswith("s") else "'s")
        return out

    def _resolve_subject(self, topics):
        s = self.subject
        if s is None:
            return None, range(0)
        rng = range(s.left_edge.i, s.right_edge.i + 1)
        if s.lower_ in ("he", "she", "it") and len(rng) == 1:
            want_person = s.lower_ != "it"
            for topic in reversed(topics):
                if (topic.label_ == "PERSON") == want_person:
                    return topic.text, rng
            return None, rng
        drop = optional_parts(self.sent, set())
        kept = [i for i in rng if i not in drop]
        text = phrase(self.doc, kept, self.names)
        return (text if text else None), rng

    # ---- clause assembly ---------------------------------------------------------------------
    def _rest(self, removed: Set[int], extra_drop: Set[int] = frozenset()) -> List[int]:
        """Sentence tokens left after the subject, the answer part and optional parts are taken out."""
        drop = optional_parts(self.sent, removed) | set(extra_drop) | set(self.subject_range) | removed
        return [t.i for t in self.sent if t.i not in drop and not (t.is_punct and t.i == self.sent.end - 1)]

    def _inverted(self, wh: str, removed: Set[int], extra_drop: Set[int] = frozenset()) -> Optional[str]:
        """wh + auxiliary (or do-support) + subject + the rest: "When was Bach born?"."""
        if self.subject_text is None or self.subject.i > self.root.i:
            return None
        rest = self._rest(removed, extra_drop)
        if any(i < self.subject_range.start for i in rest):  # something before the subject that stays: skip
            return None
        replace: Dict[int, str] = dict(self.names)
        if self.auxes:
            first = self.auxes[0]
        elif self.root.lemma_ == "be" and self.root.tag_ in ("VBD", "VBZ", "VBP"):
            first = self.root
        elif self.root.tag_ in DO_SUPPORT and self.root.pos_ == "VERB":
            replace[self.root.i] = self.root.lemma_
            return f"{wh} {DO_SUPPORT[self.root.tag_]} {self.subject_text} {render(self.doc, rest, replace)}?"
        else:
            return None
        rest = [i for i in rest if i != first.i]
        return f"{wh} {first.text.lower()} {self.subject_text} {render(self.doc, rest, replace)}?"

    def _subject_question(self, wh: str, removed: Set[int]) -> Optional[str]:
        """wh in the subject's place, the adjuncts left out: "Who invented the Web?"."""
        if self.root.tag_ not in ("VBD", "VBZ", "VBP") and not self.auxes:
            return None
        rest = self._rest(removed, adjuncts(self.root, set()))
        rest = [i for i in rest if i > self.subject_range.stop - 1]
        if not any(self.doc[i].pos_ in ("NOUN", "PROPN", "NUM", "ADJ") for i in rest):
            return None  # "Who rises?", "Which place is bordered?" say too little
        if rest[0] not in {a.i for a in self.auxes} | {self.root.i} and self.doc[rest[0]].dep_ not in ("neg", "advmod"):
            return None  # the subject was misparsed: the verb must follow it
        if any(c.dep_ == "ccomp" for c in self.root.children):
            return None
        return f"{wh} {render(self.doc, rest, self.names)}?"

    # ---- constructions -----------------------------------------------------------------------
    def class_noun(self, rng: range, kind: str) -> Optional[str]:
        """The kind-of-thing word ending a name of two or more words ("the Black Sea" -> "sea"), if any."""
        last = self.doc[rng.stop - 1]
        named = kind in ("GPE", "LOC", "FAC", "ORG", "ORG_NAME", "EVENT", "WORK_OF_ART", "LAW", "PRODUCT")
        if named and rng.stop - rng.start >= 2 and last.lower_ in CLASS_NOUNS and self.doc[rng.stop - 2].is_alpha:
            return last.lower_
        return None

    def wh_for(self, rng: range, kind: str) -> str:
        place = place_kind(self.doc[rng.start:rng.stop].text) if kind in ("GPE", "LOC") else None
        if place:
            return f"which {place}"
        noun = self.class_noun(rng, kind)
        return f"which {noun}" if noun else WH_FOR_TYPE.get(kind, "what")

    def candidates(self) -> List[Candidate]:
        out: List[Candidate] = []
        if self.root.pos_ not in ("VERB", "AUX") or self.subject is None:
            return out
        builders = (self._subject, self._object, self._time_place, self._passive_to_active,
                    self._active_to_passive, self._how_many, self._how_measure, self._nationality,
                    lambda: measure_questions(self), lambda: boundary_questions(self),
                    lambda: place_questions(self), lambda: whose_questions(self))
        for build in builders:
            for made in build() or []:
                if made is not None:
                    out.append(made)
        return out

    def _make(self, question: Optional[str], rng: range, construction: str, kind: str) -> Optional[Candidate]:
        if not question:
            return None
        question = re.sub(r"[\s.,;:!]+\?$", "?", re.sub(r"\s+", " ", question).strip())
        question = question[0].upper() + re.sub(r"(?<=\s)The\b", "the", question[1:])
        return Candidate(question, self.doc[rng.start].idx, self.doc[rng.stop - 1].idx + len(self.doc[rng.stop - 1]),
                         construction, kind)

    def _subject(self):
        if self.subject.lower_ in UNRESOLVED or self.subject_text is None:
            return []
        head = self.subject
        named = named_class(head)  # "The space shuttle Discovery launched ..." -> "Which space shuttle launched ...?"
        if named:
            question = self._subject_question(f"which {named[0]}", set(subtree_range(head)))
            return [self._make(question, named[1], "which", answer_type(self.doc, named[1]))]
        rng = answer_range(head)
        kind = answer_type(self.doc, rng)
        if kind in ("DATE", "CARDINAL", "MONEY", "PERCENT", "QUANTITY") or (kind == "NP" and head.pos_ != "PROPN"):
            return []
        # "which + noun": a named modifier of a common noun head ("the Ming dynasty") -> "Which dynasty"
        if head.pos_ == "NOUN" and rng.stop <= head.i:
            name = [c for c in head.children if c.dep_ in ("compound", "amod") and c.ent_type_]
            if name:
                wh = f"which {head.text}"
                return [self._make(self._subject_question(wh, set(subtree_range(head))), rng, "which", kind)]
        wh = self.wh_for(rng, kind)
        return [self._make(self._subject_question(wh, set(subtree_range(head))), rng, "subject", kind)]

    def _object(self):
        out = []
        for child in self.root.children:
            if child.dep_ not in ("dobj", "attr") or child.i < self.root.i or child.lower_ in UNRESOLVED:
                continue
            named = named_class(child)  # "... released the album Abbey Road" -> "Which album did ... release?"
            if named:
                question = self._inverted(f"which {named[0]}", set(subtree_range(child)))
                out.append(self._make(question, named[1], "which", answer_type(self.doc, named[1])))
                continue
            if child.dep_ == "attr" and not child.ent_type_:
                continue
            rng = answer_range(child)
            kind = answer_type(self.doc, rng)
            if kind in ("DATE", "CARDINAL", "MONEY", "PERCENT", "QUANTITY"):
                continue
            wh = "who" if kind == "PERSON" else self.wh_for(rng, kind) if child.ent_type_ else "what"
            out.append(self._make(self._inverted(wh, set(subtree_range(child))), rng, "object", kind))
        return out

    def _time_place(self):
        out = []
        for prep in self.root.children:
            pobj = next((c for c in prep.children if c.dep_ == "pobj"), None)
            if prep.dep_ != "prep" or pobj is None:
                continue
            named = named_class(pobj)  # "... sailed on the ship HMS Beagle" -> "On which ship did ... sail?"
            if named:
                question = self._inverted(f"{prep.lower_} which {named[0]}", set(subtree_range(prep)))
                out.append(self._make(question, named[1], "which", answer_type(self.doc, named[1])))
                continue
            rng = answer_range(pobj)
            kind = answer_type(self.doc, rng)
            text = self.doc[rng.start:rng.stop].text
            if kind == "DATE" and prep.lower_ in TIME_PREPS and not set(words(text)) & DURATION_UNITS:
                if prep.lower_ in ("in", "on", "at", "during"):
                    year = re.fullmatch(r"1\d{3}|20\d{2}", text) and self.rng.random() < 0.3
                    wh = f"{prep.lower_} what year" if year else "when"
                else:  # "since 1990" keeps its preposition: "Since when ...?" reads oddly, "Until when" fine
                    wh = f"{prep.lower_} when" if prep.lower_ in ("since", "until") else None
                construction = "time"
            elif kind in ("GPE", "LOC", "FAC") and prep.lower_ in PLACE_PREPS | WHICH_PREPS:
                place = place_kind(text)
                if place and place != "country" and (prep.lower_ not in PLACE_PREPS or self.rng.random() < 0.5):
                    place = None  # half "where", half "In which city ...?"
                noun = place or self.class_noun(rng, kind)
                if noun is None and prep.lower_ not in PLACE_PREPS:
                    continue
                wh = f"{prep.lower_} which {noun}" if noun else "where"
                construction = "which" if noun else "place"
            elif kind == "DATE" and prep.lower_ == "for" and set(words(text)) & DURATION_UNITS:
                wh, construction = "how long", "how_measure"
            else:
                continue
            if wh:
                out.append(self._make(self._inverted(wh, set(subtree_range(prep))), rng, construction, kind))
        return out

    def _passive_to_active(self):
        """"X was designed by Y" -> "Who designed X?" (answer Y)."""
        agent = next((c for c in self.root.children if c.dep_ == "agent"), None)
        aux = [a for a in self.auxes if a.dep_ == "auxpass"]
        if agent is None or self.root.tag_ != "VBN" or len(self.auxes) != 1 or not aux or self.subject_text is None:
            return []
        pobj = next((c for c in agent.children if c.dep_ == "pobj"), None)
        if pobj is None or pobj.lower_ in UNRESOLVED:
            return []
        rng = answer_range(pobj)
        kind = answer_type(self.doc, rng)
        if aux[0].lower_ in ("was", "were"):
            verb = PAST_OF_PARTICIPLE.get(self.root.lower_, self.root.lower_)
        elif aux[0].lower_ in ("is", "are"):
            verb = third_person(self.root.lemma_)
        else:
            return []
        wh = "who" if kind in ("PERSON", "ORG", "ORG_NAME", "NORP") else "what"
        removed = set(subtree_range(agent)) | {aux[0].i, self.root.i}
        rest = [i for i in self._rest(removed, adjuncts(self.root, removed)) if i > self.root.i]
        question = f"{wh} {verb} {self.subject_text} {render(self.doc, rest, self.names)}?"
        return [self._make(question, rng, "passive_to_active", kind)]

    def _active_to_passive(self):
        """"Fleming discovered penicillin" -> "Who was penicillin discovered by?" (answer Fleming)."""
        obj = next((c for c in self.root.children if c.dep_ == "dobj"), None)
        if obj is None or self.auxes or self.root.tag_ != "VBD" or self.subject.lower_ in UNRESOLVED:
            return []
        if obj.lower_ in UNRESOLVED or self.subject_text is None or self.subject.i > self.root.i:
            return []
        if any(c.dep_ in ("xcomp", "ccomp", "dative", "prt", "oprd", "attr") for c in self.root.children):
            return []  # "gave him the book", "made it possible": the passive would need them too
        if any(c.dep_ == "det" and c.lower_ != "the" for c in obj.children):
            return []  # "Who was a crucial role played by?": only definite objects read well
        rng = answer_range(self.subject)
        kind = answer_type(self.doc, rng)
        if kind not in ("PERSON", "ORG", "ORG_NAME", "NORP"):
            return []
        drop = optional_parts(self.sent, set(subtree_range(obj)))
        obj_text = phrase(self.doc, [i for i in subtree_range(obj) if i not in drop], self.names)
        if not obj_text or words(obj_text)[0] in UNRESOLVED:
            return []
        participle = PARTICIPLE_OF_PAST.get(self.root.lower_, self.root.lower_)
        be = "were" if obj.tag_ in ("NNS", "NNPS") else "was"
        return [self._make(f"who {be} {obj_text} {participle} by?", rng, "active_to_passive", kind)]

    def _how_many(self):
        out = []
        for tok in self.sent:
            if tok.dep_ != "nummod" or tok.head.pos_ != "NOUN" or tok.i > tok.head.i:
                continue
            noun = tok.head
            if noun.lower_ in DURATION_UNITS or not noun.tag_.endswith("S") or any(
                    c.dep_ in ("conj", "cc") for c in noun.children):
                continue
            rng = range(tok.left_edge.i, tok.right_edge.i + 1)
            removed = set(subtree_range(noun))
            phrase = render(self.doc, [i for i in range(rng.stop, noun.i + 1)])
            wh = f"how many {phrase}"
            if noun == self.subject:
                question = self._subject_question(wh, removed)
            elif noun.dep_ == "dobj" and noun.head == self.root:
                question = self._inverted(wh, removed)
            else:
                continue
            out.append(self._make(question, rng, "how_many", "CARDINAL"))
        return out

    def _nationality(self):
        """"Bach was a German composer" -> "What nationality was Bach?" (answer "German": a NORP word
        describing the person the copula's subject names)."""
        if self.root.lemma_ != "be" or self.subject_text is None or self.subject.lower_ in UNRESOLVED:
            return []
        if answer_type(self.doc, answer_range(self.subject)) != "PERSON" or self.subject.i > self.root.i:
            return []
        attr = next((c for c in self.root.children if c.dep_ == "attr" and c.pos_ == "NOUN"), None)
        if attr is None:
            return []
        norp = [c for c in attr.children if c.dep_ in ("amod", "compound") and c.ent_type_ == "NORP" and c.i < attr.i]
        if len(norp) != 1:
            return []
        rng = range(norp[0].i, norp[0].i + 1)
        return [self._make(f"what nationality {self.root.text} {self.subject_text}?", rng, "nationality", "NORP")]

    def _how_measure(self):
        """"The tower is 324 metres tall" -> "How tall is the tower?"; "lasted six years" -> "How long ...?"."""
        out = []
        for tok in self.sent:
            if tok.lower_ in MEASURE_ADJECTIVES and tok.head == self.root and tok.dep_ in ("acomp", "advmod"):
                measure = next((c for c in tok.children if c.dep_ == "npadvmod" and
                                any(g.like_num for g in c.subtree)), None)
                if measure is None:
                    continue
                rng = subtree_range(measure)
                out.append(self._make(self._inverted(f"how {tok.lower_}", set(rng) | {tok.i}), rng,
                                      "how_measure", "QUANTITY"))
            elif (tok.head == self.root and tok.dep_ in ("dobj", "npadvmod") and tok.lower_ in DURATION_UNITS
                  and any(c.like_num for c in tok.children)):
                rng = answer_range(tok) if tok.ent_type_ else subtree_range(tok)
                out.append(self._make(self._inverted("how long", set(subtree_range(tok))), rng,
                                      "how_measure", "DATE"))
        return out
