"""Short paragraphs about one Wikipedia article's subject, built from the article's own sentences.

    texts = article_digests(title, docs, rng)    # ["Anarchism is a political philosophy ... It ... It ..."]

People's questions are often about a short description of one thing: a first sentence that says what it is
("The Danube is the second-longest river in Europe"), then facts about it that say "it" or "he" ("It flows
into the Black Sea"). A reader trained only on Wikipedia's and BBC News' long paragraphs learns to answer
from the sentence that names the subject, often that first one ("Into which sea does the Danube flow?" ->
"river"). A digest puts an article's first sentence before ``FACTS_PER_DIGEST`` of the article's later
sentences whose subject is the article's subject, each starting with "it" / "he" / "she" (real sentences,
only their subject replaced), so the question, which names the subject, must be matched to a sentence by
what it says. The questions are then generated from the digest like from any paragraph.
"""
from __future__ import annotations

import random
from typing import List, Optional, Sequence

FACTS_PER_DIGEST = 2
ROUNDS = 3  # digests per fact: the facts are few (about 250 questions a round from gensim's 98 articles)
MIN_WORDS, MAX_WORDS = 6, 30
MALE, FEMALE = {"he", "him", "his", "himself"}, {"she", "her", "hers", "herself"}


def _subject(sent):
    return next((c for c in sent.root.children if c.dep_ in ("nsubj", "nsubjpass")), None)


def _names_title(text: str, title: str, person: bool) -> bool:
    text = text[4:] if text.startswith("The ") else text
    return text == title or (person and text == title.split()[-1])


def _pronoun(docs, person: bool) -> Optional[str]:
    """"It", or for a person the article's own "He" / "She" (None when it uses neither more)."""
    if not person:
        return "It"
    words = [t.lower_ for doc in docs for t in doc]
    male, female = sum(w in MALE for w in words), sum(w in FEMALE for w in words)
    return None if male == female else "She" if female > male else "He"


def _fact(sent, previous, title: str, person: bool, pronoun: str) -> Optional[str]:
    """The sentence said with a pronoun subject, when its subject is the article's subject and nothing stands
    between the subject and its verb: by name, or by that pronoun at a paragraph's start or right after a
    sentence about the subject (elsewhere "It was designed by ..." is often about something else)."""
    subj = _subject(sent)
    if subj is None or not MIN_WORDS <= len(sent) <= MAX_WORDS or subj.left_edge.i != sent.start:
        return None
    start, end = subj.left_edge.i, subj.right_edge.i + 1
    if any(t.dep_ not in ("aux", "auxpass", "neg", "advmod") for t in sent.doc[end:sent.root.i]):
        return None
    said = sent.doc[start:end].text
    before = None if previous is None else _subject(previous)
    about = previous is None or (before is not None and (before.lower_ == pronoun.lower() or _names_title(
        previous.doc[before.left_edge.i:before.right_edge.i + 1].text, title, person)))
    if _names_title(said, title, person) or (said.lower() == pronoun.lower() and about):
        rest = sent.doc[end:sent.end].text_with_ws.strip()
        return f"{pronoun} {rest}" if rest[-1:] in ".!?" else None
    return None


def _facts(docs, title: str, person: bool, pronoun: str) -> List[str]:
    out = []
    for d, doc in enumerate(docs):
        sents = list(doc.sents)
        for n, sent in enumerate(sents):
            if d or n:  # not the lead sentence itself
                fact = _fact(sent, sents[n - 1] if n else None, title, person, pronoun)
                if fact:
                    out.append(fact)
    return out


def article_digests(title: str, docs: Sequence, rng: random.Random, person: bool) -> List[str]:
    """Digests of one article (``docs``: its parsed paragraphs in order; ``person``: its subject is a person)."""
    if not docs or "(" in title or title.lower().startswith("list of"):
        return []
    lead = next(iter(docs[0].sents))
    subj = _subject(lead)
    pronoun = _pronoun(docs, person)
    if (pronoun is None or subj is None or lead.root.lemma_ != "be" or len(lead) > 45
            or title.split()[-1] not in lead.doc[subj.left_edge.i:subj.right_edge.i + 1].text):
        return []  # the article does not open with "<title> is ...": no description to build on
    facts, out = _facts(docs, title, person, pronoun), []
    for _ in range(ROUNDS):  # each fact in ROUNDS digests, beside different others
        rng.shuffle(facts)
        out += [" ".join([lead.text.strip()] + facts[k:k + FACTS_PER_DIGEST])
                for k in range(0, len(facts) - FACTS_PER_DIGEST + 1, FACTS_PER_DIGEST)]
    return out
