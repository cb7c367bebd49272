"""The kind a question asks for (tasks/squad/answer_kinds.py): where the paragraph has an entity of the asked
kind only its tokens keep the decoding prior, elsewhere the entity-type column is used unchanged; the model's
feature column never changes."""
from __future__ import annotations

import pytest
import torch

from tasks.squad.answer_kinds import entities, kind_mask, kind_tokens
from tasks.squad.answer_types import expected_types, type_match_column
from tasks.squad.data import SquadExample, tokenize
from tasks.squad.tagger import NER_LABELS

# a hand-tagged paragraph: (word, entity type)
WORDS = [("The", ""), ("tower", ""), ("in", ""), ("Paris", "GPE"), (",", ""), ("France", "GPE"), (",", ""),
         ("is", ""), ("330", "QUANTITY"), ("metres", "QUANTITY"), ("tall", ""), ("and", ""), ("has", ""),
         ("three", "CARDINAL"), ("levels", ""), ("near", ""), ("the", "LOC"), ("Atlantic", "LOC"), ("Ocean", "LOC"),
         ("in", ""), ("Europe", "LOC"), ("for", ""), ("six", "DATE"), ("years", "DATE"), (".", "")]
CONTEXT = [w for w, _ in WORDS]
TAGS = torch.tensor([[NER_LABELS.index(t), 0] for _, t in WORDS], dtype=torch.uint8)


def marked(question):
    q = tokenize(question)[0]
    mask = kind_mask(q, CONTEXT, TAGS, type_match_column(TAGS, expected_types(q)))
    return " ".join(w for w, m in zip(CONTEXT, mask.tolist()) if m)


def test_entities_are_runs_of_one_type_named_without_their_article():
    assert (16, 19, "LOC", "atlantic ocean") in entities(CONTEXT, TAGS)
    assert [e[3] for e in entities(CONTEXT, TAGS)][:2] == ["paris", "france"]


@pytest.mark.parametrize("question, tokens", [
    ("How tall is the tower?", "330 metres"),                      # a measure: the number with its unit
    ("How long is the river?", "330 metres"),
    ("What is the length of the tower?", "330 metres"),
    ("How long did the work last?", "six years"),                  # a duration, not a length
    ("In which city is the tower?", "Paris"),                      # not the country nor the continent
    ("In which country is the tower?", "France"),
    ("On which continent is the tower?", "Europe"),
    ("Near which ocean is the tower?", "the Atlantic Ocean"),      # a place whose name holds the kind
])
def test_the_prior_keeps_the_asked_kind_only(question, tokens):
    assert marked(question) == tokens


@pytest.mark.parametrize("question", ["How many levels has it?", "Who built it?",
                                      "Which river flows past the tower?", "In which state is the tower?"])
def test_without_a_kind_rule_or_an_entity_of_the_kind_the_type_column_is_kept(question):
    q = tokenize(question)[0]
    column = type_match_column(TAGS, expected_types(q))
    assert kind_mask(q, CONTEXT, TAGS, column).tolist() == column.squeeze(1).bool().tolist()
    assert kind_tokens(q, CONTEXT, TAGS) is None


def test_the_switch_narrows_the_decoding_mask_and_leaves_the_features():
    from tasks.common.text import PAD, UNK, Vocabulary
    from tasks.squad.features import collate, encode_split
    text = "The tower stands in Paris, France. It is 330 metres tall and has three levels."
    ex = SquadExample("q1", "", text, "In which city is the tower?", ["Paris"], [text.index("Paris")])
    enc = encode_split([ex], tagger="spacy_en_md", type_match=True)[0]
    vocab = Vocabulary(sorted(set(enc.context_words + enc.question_words)), (PAD, UNK))
    enc = enc.with_ids(vocab)
    broad, narrow = (collate([enc], [0], vocab.pad_id, kinds=k) for k in (False, True))
    words = [text[s:e] for s, e in enc.spans]
    assert [w for w, m in zip(words, narrow["type_match"][0].tolist()) if m] == ["Paris"]
    assert {"Paris", "France"} <= {w for w, m in zip(words, broad["type_match"][0].tolist()) if m}
    assert torch.equal(broad["features"], narrow["features"])


@pytest.mark.parametrize("question, kind", [
    ("How high is Kilimanjaro?", "measures"), ("What is the length of the Rhine?", "measures"),
    ("When did the Thirty Years' War end?", "time boundaries"), ("When did the reign begin?", "time boundaries"),
    ("In which city is the Louvre?", "places by kind"), ("Into which sea does the Rhine flow?", "places by kind"),
    ("Which treaty ended the war?", "works and events"), ("Whose poem did Beethoven set?", "works and events"),
    ("Who painted The Night Watch?", "other"), ("When was Sputnik 1 launched?", "other"),
])
def test_question_kinds_come_from_the_question_words(question, kind):
    from tasks.squad.question_kinds import question_kind
    assert question_kind(question) == kind


def test_scores_by_kind_add_up_to_the_whole(tmp_path, capsys):
    import json

    from conftest import ROOT
    from tasks.squad.data import load_squad_file
    from tasks.squad.score_predictions import main
    data = ROOT / "tasks" / "squad" / "human_report-v1.1.json"
    examples = load_squad_file(data)
    answers = {ex.qid: ex.answers[0] if k % 2 else "nothing" for k, ex in enumerate(examples)}  # every other right
    (tmp_path / "p.json").write_text(json.dumps(answers), encoding="utf-8")
    main([str(data), str(tmp_path / "p.json"), "--by-kind"])
    out = json.loads(capsys.readouterr().out)
    kinds = {k: g for k, g in out["groups"].items() if k.startswith("kind: ")}
    assert sum(g["questions"] for g in kinds.values()) == len(examples) == 231
    assert out["groups"]["ids: human"]["questions"] == 81 and out["groups"]["ids: human-report"]["questions"] == 150
    right = sum(g["exact_match"] * g["questions"] for g in kinds.values()) / 100
    assert right == pytest.approx(len(examples) // 2, abs=0.05) == pytest.approx(out["exact_match"] * 2.31, abs=0.05)
