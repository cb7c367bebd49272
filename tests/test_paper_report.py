"""scripts/paper_report.py on fake run dirs (a crashed run, a missing cell) and scripts/reproduce.py's plan."""
from __future__ import annotations

import json
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))  # scripts are not a package

import paper_report  # noqa: E402
import reproduce  # noqa: E402
from paper_tables import TABLES, cells_at  # noqa: E402


def _run(root, experiment, seed, ppl=None, items=None, error=None):
    run = root / "cpu" / experiment / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "cell.json").write_text(json.dumps({"machine": {"cpu": "Test CPU"}, "wall_s": 120.0,
                                               "config": {"trainer": {"max_epochs": 1}}}))
    if error:
        (run / "failure.json").write_text(json.dumps({"error": error}))
        return
    (run / "results.json").write_text(json.dumps({"test": {"ppl": ppl}, "train_items_per_s": items, "steps": 10}))
    (run / "metrics.jsonl").write_text(json.dumps({"split": "valid", "step": 10, "ppl": ppl + 5}) + "\n"
                                       + '{"split": "valid", "ste')  # a run killed mid-write


def test_report_tables_missing_cells_and_failures(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "cpu/ptb_sru", 1, ppl=200.0, items=3000.0)
    _run(runs, "cpu/ptb_sru", 2, ppl=210.0, items=3200.0)
    _run(runs, "cpu/ptb_lstm", 1, error="RuntimeError: out of memory")
    _run(runs, "cpu/ptb_lstm", 2, ppl=230.0, items=1000.0)
    text = paper_report.main(["--runs", str(runs), "--out", str(tmp_path / "docs" / "paper.md")])
    assert "| SRU 6x910 | 60.3 | 205.00 ± 7.07 | 2 | 0 | cpu | 1 | 2.0 min |" in text
    assert "| LSTM 6x910 | n/a | 230.00 | 1 | 1 | cpu |" in text
    assert "failed: LSTM 6x910 seed1: RuntimeError: out of memory" in text
    assert "shape holds here: SRU 6x910 ppl 205 vs LSTM 6x910 230" in text and "= 3.10x" in text
    # enwik8 (lm_char) cells were never run: listed as missing, never filled in
    assert "| SRU 6 layers | 1.19 | **missing** (not run) |" in text
    assert "no speed benchmark in this run set" in text
    assert (tmp_path / "docs" / "img" / "paper_lm_cpu.png").is_file()


def test_shape_statement_says_when_the_shape_does_not_hold(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "cpu/ptb_sru", 1, ppl=300.0, items=3000.0)
    _run(runs, "cpu/ptb_lstm", 1, ppl=200.0, items=1000.0)
    text = paper_report.main(["--runs", str(runs), "--out", str(tmp_path / "paper.md")])
    assert "shape does NOT hold here" in text and "(worse by more than 2%;" in text


def test_every_cpu_and_paper_cell_names_an_existing_experiment(capsys):
    experiments = {str(p.relative_to(ROOT / "conf" / "experiment"))[:-5]
                   for p in (ROOT / "conf" / "experiment").rglob("*.yaml")}
    for table in TABLES.values():
        for scale in ("cpu", "paper"):
            for cell in cells_at(table, scale):
                assert getattr(cell, scale) in experiments, f"{table.key}: {getattr(cell, scale)} has no config"
    reproduce.main(["--scale", "cpu", "--table", "lm", "--seeds", "1,2", "--dry-run"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("python train.py experiment=cpu/ptb_sru seed=1")
    assert len(printed) == 4


def test_a_finished_cell_is_not_rerun(tmp_path):
    run_dir = tmp_path / "cell"
    run_dir.mkdir()
    (run_dir / "results.json").write_text("{}")
    assert reproduce.run_cell("cpu/ptb_sru", 1, run_dir, []) == "done"
