"""task.synonyms (tasks/squad/features.py; WordNet read by tasks/corpora/wordnet.py): lemmas and synonyms as one
more token feature column, and training copies of questions with a word swapped for a synonym. WordNet comes from
Debian's wordnet-base (.ci/run)."""
from __future__ import annotations

import pytest
import torch
from conftest import compose

from tasks.engine.base import build_task
from tasks.squad.data import SquadExample, tokenize
from tasks.corpora.wordnet import WORDNET_DIR, WordNet, load_wordnet
from tasks.squad.features import (NUM_FEATURES, STOP, encode_split, num_features, swap_synonyms, synonym_column,
                                  synonym_questions)

pytestmark = pytest.mark.skipif(not (WORDNET_DIR / "index.noun").is_file(),
                                reason="apt-get install wordnet-base")

GALILEO = ("In 1610 Galileo used a telescope and found the four largest moons of Jupiter. "
           "The ship struck an iceberg and sank.")


@pytest.fixture(scope="module")
def wordnet():
    return load_wordnet()


def test_lemmas_of_irregular_and_regular_forms(wordnet):
    assert "strike" in wordnet.all_lemmas("struck")      # verb.exc
    assert "find" in wordnet.all_lemmas("found")
    assert wordnet.lemmas("moons", "noun") == ["moon"]   # suffix rule
    assert "large" in wordnet.all_lemmas("largest")
    assert wordnet.all_lemmas("xqzzy") == frozenset()


def test_synonyms_come_from_the_first_senses(wordnet):
    assert "find" in wordnet.synonyms("discover") and "find" in wordnet.synonyms("discovered")
    assert "construct" in wordnet.synonyms("built")
    assert "discover" not in wordnet.synonyms("discover")  # never the word's own lemma


def test_the_column_marks_a_lemma_or_a_synonym_and_no_function_word(wordnet):
    context, _ = tokenize(GALILEO)
    column = synonym_column(wordnet, context, tokenize("What did Galileo discover in 1610?")[0])
    marked = {context[i] for i in range(len(context)) if column[i, 0] == 1}
    assert marked == {"found"}
    column = synonym_column(wordnet, context, tokenize("What did the ship strike?")[0])
    assert {context[i] for i in range(len(context)) if column[i, 0] == 1} == {"struck", "ship"}
    assert column.shape == (len(context), 1) and column.dtype == torch.float32
    assert float(synonym_column(wordnet, context, ["What", "did", "the", "of"]).sum()) == 0  # all stop words
    assert not STOP & {context[i].lower() for i in range(len(context)) if column[i, 0] == 1}


def test_swaps_are_safe_base_forms(wordnet):
    assert swap_synonyms(wordnet, "saw") == frozenset()          # also a form of "see"
    assert swap_synonyms(wordnet, "discovered") == frozenset()   # not a base form
    assert "find" in swap_synonyms(wordnet, "discover")


def test_copies_keep_paragraph_and_answer_and_swap_one_word(wordnet):
    start = GALILEO.index("the four")
    examples = [SquadExample(f"q{k}", "t", GALILEO, "What did Galileo discover in 1610?",
                             ["the four largest moons of Jupiter"], [start]) for k in range(40)]
    encoded = encode_split(examples, wordnet=wordnet)
    assert encoded[0].features.shape[1] == NUM_FEATURES + 1 == num_features(None, False, True)
    copies = synonym_questions(encoded, wordnet, 0.5, seed=3)
    assert 5 < len(copies) < 35
    again = synonym_questions(encoded, wordnet, 0.5, seed=3)  # seeded
    assert [c.example.question for c in again] == [c.example.question for c in copies]
    for copy in copies:
        words = copy.question_words
        assert len(words) == len(encoded[0].question_words) and words != encoded[0].question_words
        assert "galileo" in words and "1610" in words  # the name and the number stay
        swapped = (set(words) - set(encoded[0].question_words)).pop()
        assert swapped not in {w.lower() for w in tokenize(GALILEO)[0]}  # never a word the paragraph has
        assert copy.example.context == GALILEO and (copy.start, copy.end) == (encoded[0].start, encoded[0].end)
        assert copy.example.qid.endswith("~syn") and copy.example.question != examples[0].question
        assert copy.features.shape == encoded[0].features.shape
        found = tokenize(GALILEO)[0].index("found")
        assert copy.features[found, 0] == 0
        if swapped == "find":  # the lemma of "found": the column still marks it where the exact match cannot
            assert copy.features[found, NUM_FEATURES] == 1
    assert synonym_questions(encoded, wordnet, 0.0, seed=3) == []


def test_missing_wordnet_is_one_line_naming_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install wordnet-base.*task.synonyms=false"):
        WordNet(tmp_path)


def test_inference_state_keeps_the_column(wordnet):
    task = build_task(compose(["task=squad", "task.synonyms=true"]))
    assert task.synonyms and task.encoder_input_size() == 2 * 128 + num_features("spacy_en_md", True, True)
    task.vocab = __import__("tasks.common.text", fromlist=["Vocabulary"]).Vocabulary(["a"], ("<pad>", "<unk>"))
    state = task.inference_state()
    loaded = build_task(compose(["task=squad"]))
    loaded.restore_inference_state(state)
    assert loaded.synonyms is True
    loaded.restore_inference_state({**state, "synonym_column": None})  # a model saved before the column
    assert loaded.synonyms is False
    assert compose(["experiment=paper/squad_sru"])["task"]["synonyms"] is False
