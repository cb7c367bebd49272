"""scripts/bench_tasks.py on the tiny LM fixture: both models train on the same batches, the report
has items/s, the SRU/LSTM ratio and a step-time breakdown that adds up. No timing assertions."""
from __future__ import annotations

import json

import pytest

from conftest import LM_FIXTURE, load_script

bench_tasks = load_script("bench_tasks")

TINY = ["task.data.source=files", f"task.data.train_file={LM_FIXTURE / 'train.txt'}",
        f"task.data.valid_file={LM_FIXTURE / 'valid.txt'}", f"task.data.test_file={LM_FIXTURE / 'test.txt'}",
        "task.batch_size=4", "task.bptt=8", "model.hidden_size=16", "model.num_layers=2"]


def test_lm_sru_vs_lstm_report(tmp_path):
    argv = ["--tasks", "lm", "--steps", "2", "--rounds", "2", "--threads", "1", "--out", str(tmp_path)]
    for override in TINY:
        argv += ["--override", override]
    [result] = bench_tasks.main(argv)
    assert result["task"] == "lm" and result["items"] == "ntokens"
    for model in ("sru", "lstm"):
        r = result[model]
        assert len(r["items_per_s_rounds"]) == 2 and r["items_per_s"] > 0
        parts = r["ms_per_step_parts"]
        assert set(parts) == set(bench_tasks.PARTS)
        assert parts["encoder_fwd"] > 0 and parts["encoder_bwd"] > 0 and parts["optimizer"] > 0
        assert r["ms_per_step"] == pytest.approx(sum(parts.values()))
    assert result["ratio_sru_over_lstm"] > 0
    saved = json.loads((tmp_path / "bench_tasks.json").read_text())
    assert saved["results"][0]["task"] == "lm"
    assert "| lm | sru |" in (tmp_path / "bench_tasks.md").read_text()


def test_unknown_task_is_one_clear_error():
    with pytest.raises(ValueError, match="expected task configs from"):
        bench_tasks.overrides_for("nope", "sru", [])
    assert bench_tasks.overrides_for("ptb-paper", "lstm", []) == ["experiment=paper/ptb_lstm"]


def test_task_configs_include_the_char_lm():
    assert {"lm", "lm_char", "classification"} <= set(bench_tasks.task_configs())
    assert bench_tasks.overrides_for("lm_char", "sru", ["seed=1"]) == ["task=lm_char", "model=sru", "seed=1"]
