"""Say a named subject again as people do: "it", "he", "she" or "the river", after the paragraph has named it.

    context, qas = refer_back(doc, qas, rng)    # the paragraph's text with later mentions replaced, offsets moved

Wikipedia names its subject in nearly every sentence ("The Danube ... The Danube flows into the Black Sea"),
so a question that names the subject ("Into which sea does the Danube flow?") always finds its answer in a
sentence that names it too, and a reader trained on it learns to answer from the sentence with the name. People
write "It flows into the Black Sea" after the first sentence (the hand-written check set does, and SQuAD's
articles do), and the reader then has to follow the reference back. So a sentence after the first mention
whose subject is exactly that name (optionally with "The") is rewritten, with probability ``REFER_BACK_SHARE``,
to start with a pronoun, or with "the" + the noun the first sentence classified it by ("The Danube is a river"
-> "the river"). The questions are made from the unchanged parse, so they keep the name; a question whose
answer is the replaced subject ("Who ...?") keeps its sentence unchanged.
"""
from __future__ import annotations

import random
from typing import Dict, List, Optional, Sequence, Tuple

REFER_BACK_SHARE = 0.75  # some repeated names stay: real text does both
NAMED = {"PERSON", "ORG", "GPE", "LOC", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART", "NORP"}
MALE, FEMALE = {"he", "him", "his", "himself"}, {"she", "her", "hers", "herself"}


def _subject_name(sent):
    """(start, end, entity) when the sentence's subject is exactly a named entity, optionally after "The"."""
    subj = next((c for c in sent.root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None:
        return None
    start, end = subj.left_edge.i, subj.right_edge.i + 1
    if any(t.dep_ not in ("aux", "auxpass", "neg", "advmod") for t in sent.doc[end:sent.root.i]):
        return None  # only "Name (aux) verb ...": an inserted clause would dangle after a pronoun
    ent = next((e for e in sent.ents if e.start <= subj.i < e.end), None)
    if ent is None or ent.label_ not in NAMED or start != sent.start or end != ent.end:
        return None
    if ent.start != start and not (ent.start == start + 1 and sent.doc[start].lower_ == "the"):
        return None
    if subj.tag_ == "NNPS" or sent.root.tag_ == "VBP" or any(c.lower_ == "were" for c in sent.root.children):
        return None  # plural ("The Beatles were ..."): "they" is left out
    return start, end, ent


def _pronoun(ent, doc) -> Optional[str]:
    """"it", or for a person the paragraph's own "he" / "she" (none there: None, as NER also calls rivers persons)."""
    if ent.label_ != "PERSON":
        return "it"
    words = [t.lower_ for t in doc]
    male, female = sum(w in MALE for w in words), sum(w in FEMALE for w in words)
    return None if male == female else "she" if female > male else "he"


def _class_noun(first_sent, name: str) -> Optional[str]:
    """"The Danube is the second-longest river in Europe" -> "river": the attribute noun of a first "is"."""
    root = first_sent.root
    subj = next((c for c in root.children if c.dep_ == "nsubj"), None)
    if root.lemma_ != "be" or subj is None or name not in first_sent.doc[subj.left_edge.i:subj.right_edge.i + 1].text:
        return None
    attr = next((c for c in root.children if c.dep_ == "attr" and c.pos_ == "NOUN"), None)
    return attr.lower_ if attr is not None and attr.is_alpha else None


def refer_back(doc, qas: Sequence[Dict], rng: random.Random) -> Tuple[str, List[Dict]]:
    """The paragraph's text with later mentions of a named subject replaced, and ``qas`` with their answers'
    ``answer_start`` moved to match (answers never overlap a replaced mention)."""
    sents = list(doc.sents)
    if len(sents) < 2:
        return doc.text, list(qas)
    answers = [(a["answer_start"], a["answer_start"] + len(a["text"])) for qa in qas for a in qa["answers"]]
    named: Dict[str, int] = {}  # entity text -> index of the first sentence that named it
    for n, sent in enumerate(sents):
        for e in sent.ents:
            named.setdefault(e.text, n)
            if e.label_ == "PERSON":
                named.setdefault(e[-1].text, n)  # "Johann Sebastian Bach ... Bach was born ..."
    edits = []  # (char start, char end, replacement)
    for n, sent in enumerate(sents[1:], start=1):
        found = _subject_name(sent)
        if found is None:
            continue
        start, end, ent = found
        first = named.get(ent.text, n)
        if first >= n:
            continue
        lo, hi = doc[start].idx, doc[end - 1].idx + len(doc[end - 1])
        if any(a < hi and lo < b for a, b in answers) or rng.random() >= REFER_BACK_SHARE:
            continue
        noun = _class_noun(sents[first], ent.text)
        pronoun = _pronoun(ent, doc)
        word = f"the {noun}" if noun and (pronoun is None or rng.random() < 0.5) else pronoun
        if word is None:
            continue
        edits.append((lo, hi, word[0].upper() + word[1:]))
    if not edits:
        return doc.text, list(qas)
    text, out = doc.text, [dict(qa, answers=[dict(a) for a in qa["answers"]]) for qa in qas]
    for lo, hi, word in reversed(edits):  # from the end, so earlier offsets stay valid while editing
        text = text[:lo] + word + text[hi:]
        for qa in out:
            for a in qa["answers"]:
                if a["answer_start"] >= hi:
                    a["answer_start"] += len(word) - (hi - lo)
    return text, out
