"""The hand-written questions are split once into a tuning half and a report half (tasks/squad/README.md):
both files are valid SQuAD v1.1 with exact offsets, together they hold the 157-question check set exactly once,
no paragraph is in both, and the report half adds at least 100 new questions of the kinds people ask."""
from __future__ import annotations

import json

from conftest import ROOT, compose
from tasks.squad.data import human_check_path, load_squad_file

SQUAD = ROOT / "tasks" / "squad"
WHOLE, TUNE, REPORT = (SQUAD / f"human_{name}-v1.1.json" for name in ("dev", "tune", "report"))


def _examples(path):
    return load_squad_file(path)  # validates every answer_start against its context


def test_the_halves_load_and_their_offsets_are_exact():
    for path in (TUNE, REPORT):
        for ex in _examples(path):
            for text, start in zip(ex.answers, ex.answer_starts):
                assert ex.context[start:start + len(text)] == text, (path.name, ex.qid)


def test_the_check_set_is_split_once_and_no_paragraph_is_in_both_halves():
    whole, tune, report = (_examples(p) for p in (WHOLE, TUNE, REPORT))
    tune_ids, report_ids = {ex.qid for ex in tune}, {ex.qid for ex in report}
    assert not tune_ids & report_ids
    assert {ex.qid for ex in whole} <= tune_ids | report_ids
    assert len(tune_ids | report_ids) == len(tune) + len(report)  # no question twice within a half
    assert not {ex.context for ex in tune} & {ex.context for ex in report}
    assert not {ex.title for ex in tune} & {ex.title for ex in report}
    titles = [a["title"] for a in json.loads(WHOLE.read_text(encoding="utf-8"))["data"]]
    assert {ex.title for ex in tune} == set(titles[0::2])  # the documented rule: 1st, 3rd, 5th ... article


def test_the_report_half_adds_at_least_100_new_questions_of_the_kinds_people_ask():
    whole_contexts = {ex.context for ex in _examples(WHOLE)}
    new = [ex for ex in _examples(REPORT) if ex.context not in whole_contexts]
    assert len(new) >= 100
    asked = " ".join(ex.question.lower() for ex in new)
    for kind in ("how high", "how long", "how far", "how many", "how deep", "in which city", "in which country",
                 "which ocean", "which river", "which war", "which museum", "which emperor", "begin?", "end?"):
        assert kind in asked, kind


def test_what_every_run_scores_beside_its_test_is_the_tuning_half():
    """A run's printed human_em may steer a knob, so the default check set must be the tuning half; the report
    half is read only by an explicit evaluate.py file= (the default Table 2 cells compose the same key)."""
    for overrides in (["task=squad"], ["experiment=cpu/squad_sru"], ["experiment=cpu/squad_lstm"]):
        assert human_check_path(compose(overrides).task.human_check).resolve() == TUNE.resolve(), overrides
