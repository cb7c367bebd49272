"""Later mentions of a paragraph's named subject said as people say them (tasks/squad/generator/pronouns.py): the
rewrite picks the right word, never touches an answer, and moves every answer offset with the text; and an
article's digests (tasks/squad/generator/digests.py) hold its first sentence and facts about its subject only.

Needs spaCy's en_core_web_md (tasks/squad/parser.py), loaded once for this module."""
from __future__ import annotations

import random
import re

import pytest

from tasks.squad.generator import pronouns
from tasks.squad.generator.pronouns import refer_back


@pytest.fixture(scope="module")
def nlp():
    from tasks.squad.parser import load_parser
    return load_parser()


@pytest.fixture
def always(monkeypatch):
    monkeypatch.setattr(pronouns, "REFER_BACK_SHARE", 1.0)  # every eligible mention, so each case is decided


def qa(text: str, answer: str):
    return {"question": "q", "answers": [{"text": answer, "answer_start": text.index(answer)}]}


def test_a_person_named_again_becomes_the_paragraphs_own_pronoun(nlp, always):
    text = ("Marie Curie was a Polish physicist. She was born in Warsaw in 1867. "
            "Marie Curie won the Nobel Prize in Chemistry in 1911.")
    out, qas = refer_back(nlp(text), [qa(text, "1911")], random.Random(0))
    assert out == ("Marie Curie was a Polish physicist. She was born in Warsaw in 1867. "
                   "She won the Nobel Prize in Chemistry in 1911.")
    a = qas[0]["answers"][0]
    assert out[a["answer_start"]:a["answer_start"] + len(a["text"])] == "1911"


def test_a_surname_alone_refers_back_to_the_full_name(nlp, always):
    text = "Johann Sebastian Bach was a German composer. He had a large family. Bach was born in Eisenach in 1685."
    out, _ = refer_back(nlp(text), [], random.Random(0))
    assert out.endswith("He was born in Eisenach in 1685.")


def test_a_thing_becomes_it_or_the_noun_its_first_sentence_gave_it(nlp, always):
    text = ("The Danube is the second-longest river in Europe. The Danube rises in the Black Forest. "
            "The Danube flows into the Black Sea.")
    seen = set()
    for seed in range(12):
        out, qas = refer_back(nlp(text), [qa(text, "the Black Sea")], random.Random(seed))
        assert out.startswith("The Danube is the second-longest river in Europe.")
        seen.update(s.split()[0] + " " + s.split()[1] for s in out.split(". ")[1:])
        a = qas[0]["answers"][0]
        assert out[a["answer_start"]:a["answer_start"] + len(a["text"])] == "the Black Sea"
    assert seen <= {"The river", "It rises", "It flows", "The Danube"} and "The river" in seen


def test_an_answer_and_the_first_mention_are_never_rewritten(nlp, always):
    text = "Alexander Fleming was a Scottish physician. Alexander Fleming discovered penicillin in 1928."
    answer = qa(text, "Alexander Fleming discovered")  # overlaps the second mention: that sentence stays
    out, qas = refer_back(nlp(text), [answer], random.Random(0))
    assert out == text and qas[0]["answers"][0]["answer_start"] == answer["answers"][0]["answer_start"]


def test_a_subject_with_a_clause_or_a_share_of_zero_is_left(nlp, monkeypatch):
    text = "Johann Sebastian Bach was a German composer. Bach, who was a composer, married his cousin Maria."
    monkeypatch.setattr(pronouns, "REFER_BACK_SHARE", 1.0)
    assert refer_back(nlp(text), [], random.Random(0))[0] == text  # "He, who was ..." would not read
    text = "Marie Curie was a Polish physicist. She moved to Paris. Marie Curie won the Nobel Prize."
    monkeypatch.setattr(pronouns, "REFER_BACK_SHARE", 0.0)
    assert refer_back(nlp(text), [], random.Random(0))[0] == text


def test_an_article_digest_is_its_first_sentence_and_facts_about_its_subject(nlp):
    """tasks/squad/generator/digests.py: the article's first sentence, then its sentences whose subject is the article's
    subject (by name, or by "it" where "it" continues the subject), each said with "It"."""
    from tasks.squad.generator.digests import ROUNDS, article_digests
    paragraphs = ["The Danube is the second-longest river in Europe. It rises in the Black Forest in Germany.",
                  "The Danube flows into the Black Sea at the end of its course. The delta is a large wetland. "
                  "It was declared a reserve by the government in 1990.",
                  "The river was an important trade route for centuries in Europe."]
    docs = list(nlp.pipe(paragraphs))
    digests = article_digests("Danube", docs, random.Random(0), person=False)
    lead = "The Danube is the second-longest river in Europe."
    facts = {"It rises in the Black Forest in Germany.", "It flows into the Black Sea at the end of its course."}
    assert len(digests) == ROUNDS  # two facts: one digest of two per round
    for text in digests:
        assert text.startswith(lead + " ")
        assert set(re.split(r"(?<=\.) ", text[len(lead) + 1:])) == facts
    # the delta's "It" (after a sentence about something else) is not taken as the river
    assert not any("declared a reserve" in text for text in digests)
    assert article_digests("Danube", docs[1:], random.Random(0), person=False) == []  # no "<title> is ..." lead
