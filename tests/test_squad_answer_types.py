"""The answer-type match feature (tasks/squad/answer_types.py): the entity types each kind of question asks
for, the column that marks them on a tagged paragraph, and models saved before it loading unchanged."""
from __future__ import annotations

import pytest
import torch

from tasks.squad.answer_types import expected_types, type_match_column
from tasks.squad.data import SquadExample, tokenize
from tasks.squad.features import NUM_FEATURES, collate, encode_split, num_features
from tasks.squad.tagger import NER_LABELS, NUM_TAG_FEATURES

TEXT = "The Danube is Europe's second-longest river. It is about 2,850 kilometres long and rises in Germany in 1900."


def kinds(question):
    return expected_types(tokenize(question)[0])


@pytest.mark.parametrize("question, expected", [
    ("When was Bach born?", {"DATE", "TIME"}),
    ("Who invented the World Wide Web?", {"PERSON", "ORG", "NORP"}),
    ("Where does the Danube rise?", {"GPE", "LOC", "FAC"}),
    ("In which country does the Danube rise?", {"GPE", "LOC", "FAC"}),
    ("How many works did Bach write?", {"CARDINAL", "QUANTITY", "MONEY", "PERCENT"}),
    ("How high is Mount Everest?", {"CARDINAL", "QUANTITY"}),
    ("How long did the war last?", {"CARDINAL", "QUANTITY", "DATE", "TIME"}),
    ("At what age did Mozart begin composing?", {"CARDINAL", "QUANTITY", "DATE", "TIME"}),
    ("What nationality was Amundsen?", {"NORP"}),
    ("What is the total length of the Great Wall?", {"CARDINAL", "QUANTITY"}),
    ("What is the capital of Japan?", {"GPE", "LOC", "FAC"}),
    ("Which organization did Berners-Lee found?", {"ORG"}),
    ("Which treaty ended the Crimean War?", {"EVENT", "LAW"}),
    ("In which museum is the painting kept?", {"FAC", "ORG"}),
    ("Which poem made Byron famous?", {"WORK_OF_ART"}),
    ("Which emperor built the wall?", {"PERSON"}),
    ("In which mountain range is the lake?", {"GPE", "LOC", "FAC"}),
    ("How far does the village lie from Oxford?", {"CARDINAL", "QUANTITY"}),
])
def test_expected_types_by_question_kind(question, expected):
    assert kinds(question) == expected


@pytest.mark.parametrize("question", ["What did Fleming discover?", "Which work did Mozart leave unfinished?",
                                      "How often do the Olympics take place?", "Is it long?", ""])
def test_questions_without_a_rule_expect_no_type(question):
    assert kinds(question) == frozenset()


def test_the_column_marks_tokens_of_the_asked_type():
    tags = torch.tensor([[NER_LABELS.index("DATE"), 0], [0, 0], [NER_LABELS.index("QUANTITY"), 0],
                         [NER_LABELS.index("GPE"), 0]], dtype=torch.uint8)
    assert type_match_column(tags, kinds("How long is the Danube?")).squeeze(1).tolist() == [1, 0, 1, 0]
    assert type_match_column(tags, kinds("Where does it rise?")).squeeze(1).tolist() == [0, 0, 0, 1]
    assert type_match_column(tags, frozenset()).sum() == 0


def test_the_feature_follows_the_tagger_and_the_switch():
    ex = SquadExample("q1", "", TEXT, "How long is the Danube?", ["about 2,850 kilometres"],
                      [TEXT.index("about 2,850")])
    assert num_features("spacy_en_md", True) == NUM_FEATURES + NUM_TAG_FEATURES + 1
    assert num_features(None, True) == num_features(None) == NUM_FEATURES  # the column needs entity types
    matched = encode_split([ex], tagger="spacy_en_md", type_match=True)[0]
    assert encode_split([ex], tagger="spacy_en_md")[0].answer_types is None
    from tasks.common.text import PAD, UNK, Vocabulary
    vocab = Vocabulary(sorted(set(matched.context_words + matched.question_words)), (PAD, UNK))
    features = collate([matched.with_ids(vocab)], [0], vocab.pad_id)["features"]  # (Lp, 1, F)
    assert features.shape[-1] == NUM_FEATURES + NUM_TAG_FEATURES + 1
    marked = [matched.example.context[s:e] for (s, e), m in zip(matched.spans, features[:, 0, -1]) if m]
    assert "2,850" in marked and "Germany" not in marked


def test_a_model_saved_before_the_answer_type_column_loads_without_it():
    from conftest import compose
    from tasks.common.text import PAD, UNK, Vocabulary
    from tasks.engine.base import build_task
    task = build_task(compose(["task=squad"]))
    assert task.type_match and task.encoder_input_size() == 2 * 128 + NUM_FEATURES + NUM_TAG_FEATURES + 1
    state = {"vocab": Vocabulary(["bach"], (PAD, UNK)).state_dict(), "fixed_rows_from": None, "tagger": "spacy_en_md"}
    task.restore_inference_state(state)
    assert not task.type_match and task.encoder_input_size() == 2 * 128 + NUM_FEATURES + NUM_TAG_FEATURES
    task.type_match = True
    assert task.inference_state()["answer_type_column"] is True
