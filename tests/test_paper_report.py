"""reproduce/report.py (python -m reproduce.report) on hand-written run records (a missing cell, a baseline never reached, a rebuild
that changes nothing) and python -m reproduce's plan and records."""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import ROOT

from reproduce import report as paper_report
from reproduce import run_cells
from reproduce.tables import TABLES, cells_at


def _record(root, cell, seed, test, curve, cpu_s=100.0, epochs=4, share=0.5, max_epochs=10, metrics=("ppl",),
            patience=2):
    """A record as run_cells.write_record lays it out; curve: the valid ``metrics`` per evaluation (steps 10, 20,
    ...; a number, or a tuple when there are several metrics); test: the same for the test block."""
    def row(values):
        return dict(zip(metrics, values if isinstance(values, tuple) else (values,)))
    d = root / "cpu" / cell / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({"test": row(test), "steps": 10 * len(curve)}))
    (d / "metrics_valid.csv").write_text(f"step,epoch,{','.join(metrics)}\n" + "".join(
        f"{10 * (i + 1)},{i + 1},{','.join(str(v) for v in row(values).values())}\n" for i, values in enumerate(curve)))
    (d / "run.json").write_text(json.dumps({"seed": seed, "cpu_s": cpu_s, "epochs": epochs, "machine": {
        "cpu": "Test CPU", "threads": 1, "torch": "2.x"}, "recurrent_share": {"share": share},
        "budget": {"max_epochs": max_epochs, "max_steps": None, "early_stopping_patience": patience}}))


def _records(tmp_path):
    records = tmp_path / "runs"
    _record(records, "ptb_sru", 1, 200.0, [400, 300, 250, 240], cpu_s=100.0, share=0.4)
    _record(records, "ptb_sru", 2, 210.0, [410, 310, 260, 250], cpu_s=120.0, share=0.4)
    _record(records, "ptb_lstm", 1, 230.0, [420, 330, 280, 270], cpu_s=300.0, share=0.8, max_epochs=4)
    return records


def test_report_from_records_cost_columns_and_missing_cells(tmp_path):
    text = paper_report.main(["--records", str(_records(tmp_path)), "--out", str(tmp_path / "docs" / "paper.md")])
    # SRU: ppl 205 ± 7.07 over 2 seeds, CPU-s/epoch (25 + 30)/2, reaches the LSTM's best valid (270)
    # at its 3rd evaluation: 100 * 30/40 = 75 s and 120 * 30/40 = 90 s -> 82 s; 300/4 / 27.5 = 2.73x
    assert ("| SRU 6x910 | 60.3 | 205.00 ± 7.07 | 2 | 4.0 ± 0.0 | early (2/2) | 28 | n/a | 40% | 82 s | "
            "2.73x vs LSTM 2x910 (per epoch) |") in text
    assert "| LSTM 2x910 | n/a | 230.00 | 1 | 4.0 | budget, last quarter 3.57% (**1 over the 1% rule**) | 75 | n/a | 80% | 300 s | (baseline) |" in text
    assert "SRU 6x910 vs LSTM 2x910: the paper's shape holds at this scale" in text
    assert "| SRU 6 layers | 1.19 | **missing** (no record) |" in text  # enwik8 never run: never filled in
    assert (tmp_path / "docs" / "img" / "paper_lm_cpu.png").is_file()


def test_a_bench_measurement_replaces_the_records_cpu_clock(tmp_path):
    """bench_cells' equal-conditions ms/step drives the speed column, the verdict and the time to reach the
    baseline: here the records say the SRU is cheaper per epoch, the bench says it is not."""
    records = _records(tmp_path)
    bench = tmp_path / "bench" / "cpu"
    bench.mkdir(parents=True)
    (bench / "lm.json").write_text(json.dumps({"cells": {"SRU 6x910": {"cpu_ms_per_step": 250.0},
                                                         "LSTM 2x910": {"cpu_ms_per_step": 200.0}}}))
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md")])
    # SRU reaches the LSTM's best valid (270) at step 30: 30 x 250 ms = 7.5 s; 200 / 250 = 0.80x
    assert "| early (2/2) | 28 | 250 | 40% | 8 s | 0.80x vs LSTM 2x910 (per step) |" in text
    assert "SRU 6x910 vs LSTM 2x910: the paper's shape holds in quality, not in cost" in text
    assert "not cheaper per step: 0.80x)" in text
    # a table where one measured cell lacks a bench number keeps the records' clock for all its cells
    (bench / "lm.json").write_text(json.dumps({"cells": {"SRU 6x910": {"cpu_ms_per_step": 250.0}}}))
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md")])
    assert "| early (2/2) | 28 | n/a | 40% | 82 s | 2.73x vs LSTM 2x910 (per epoch) |" in text


def _speech_record(root, cell, curve, epochs=5, max_epochs=5):
    """curve: (valid wer, valid cer) per epoch, 10 steps each, 10 CPU-s per epoch; test = the last epoch's."""
    _record(root, cell, 1, curve[-1], curve, cpu_s=10.0 * len(curve), epochs=epochs, share=0.9,
            max_epochs=max_epochs, metrics=("wer", "cer"), patience=3)


def test_the_report_reads_the_curve_a_table_early_stops_on(tmp_path):
    """Speech early-stops on validation CER, its main column, with WER beside it: a run that used its whole
    budget is judged by its CER curve (0.5% over the last quarter here, not its WER curve's 10%), the time to
    reach the baseline's best is on CER too (its best CER 45: epoch 3, 30 s; its best WER 99 would give 20 s),
    and the greedy WER column, without a test greedy_wer in the record, is validation's at the best CER."""
    records = tmp_path / "runs"
    _speech_record(records, "speech_bisru", [(100, 60.0), (95, 50.0), (92, 45.0), (90, 40.2), (81, 40.0)])
    _speech_record(records, "speech_blstm", [(100, 90.0), (99, 70.0), (99.5, 45.0)], epochs=3)
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md"), "--bench", ""])
    assert ("| Bi-SRU_12L | n/a | n/a | 40.00 | 81.00 | 81.00 (valid) | 1 | 5.0 | budget, last quarter 0.50% in "
            "valid cer |") in text
    assert "| BLSTM_5L | n/a | n/a | 45.00 | 99.50 | 99.50 (valid) | 1 |" in text
    assert "| 90% | 30 s | 1.00x vs BLSTM_5L (per epoch) |" in text
    assert "Bi-SRU_12L vs BLSTM_5L: the paper's shape holds in quality, not in cost at this scale (cer 40.00 vs 45.00" in text


def test_the_greedy_column_takes_the_tests_greedy_rate_when_recorded(tmp_path):
    records = tmp_path / "runs"
    _speech_record(records, "speech_blstm", [(100, 90.0), (99, 70.0), (104.0, 45.0)], epochs=3)
    results = records / "cpu" / "speech_blstm" / "seed1" / "results.json"
    summary = json.loads(results.read_text())
    summary["test"].update({"wer": 102.0, "greedy_wer": 106.5, "greedy_cer": 50.0})
    results.write_text(json.dumps(summary))
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md"), "--bench", ""])
    assert "| BLSTM_5L | n/a | n/a | 45.00 | 102.00 | 106.50 (test) | 1 |" in text


def test_table_1_shows_kims_cnn_and_judges_the_sru_against_it(tmp_path):
    records = tmp_path / "runs"
    for cell, accuracy in (("classification_mr_sru", 74.0), ("classification_mr_lstm", 72.0),
                           ("classification_mr_cnn", 76.0), ("classification_trec_sru", 90.0),
                           ("classification_trec_cnn", 89.0)):
        _record(records, cell, 1, accuracy, [70.0, accuracy], metrics=("accuracy",), patience=3)
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md"), "--bench", ""])
    assert "| MR CNN | 81.0 static / 81.5 non-static | 76.00 | 1 |" in text
    assert ("MR SRU 2 layers vs MR CNN: the paper has accuracy 83.1 vs 81.0 (ahead); the paper's shape does NOT "
            "hold at this scale (accuracy 74.00 vs 76.00, worse by more than 2%).") in text
    assert "TREC SRU 2 layers vs TREC CNN: the paper has accuracy 94.8 vs 92.8 (ahead); the paper's shape holds" in text
    assert "TREC SRU 2 layers vs TREC LSTM: not both measured at this scale" in text


def test_a_baseline_score_never_reached_says_never(tmp_path):
    records = tmp_path / "runs"
    _record(records, "ptb_sru", 1, 300.0, [500, 400, 350])
    _record(records, "ptb_lstm", 1, 200.0, [300, 250, 200])
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md")])
    assert "| never |" in text and "shape does NOT hold" in text and "worse by more than 2%" in text


def test_squad_columns_put_each_metric_under_its_own_heading(tmp_path):
    records = tmp_path / "runs"
    d = records / "cpu" / "squad_sru" / "seed1"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({"test": {"f1": 90.0, "em": 80.0}, "steps": 20}))
    (d / "metrics_valid.csv").write_text("step,epoch,f1,em\n10,1,85,75\n20,2,89,79\n")
    (d / "run.json").write_text(json.dumps({"seed": 1, "cpu_s": 50.0, "epochs": 2, "machine": {
        "cpu": "Test CPU", "threads": 1, "torch": "2.x"}, "recurrent_share": {"share": 0.5},
        "budget": {"max_epochs": 30, "max_steps": None, "early_stopping_patience": 3}}))
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md")])
    assert "| cell | paper f1 | paper em | ours f1 (mean ± std) | ours em | seeds |" in text
    assert "| SRU 6 layers | 80.2 | 71.4 | 90.00 | 80.00 | 1 |" in text
    assert "| LSTM 3 layers (DrQA) | 78.8 | 69.5 | **missing** (no record) |  | 0 |" in text


@pytest.mark.slow
def test_rebuilding_from_unchanged_records_changes_only_the_date_line(tmp_path):
    records = _records(tmp_path)
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / name / "paper.md"
        paper_report.main(["--records", str(records), "--out", str(out)])
        outputs.append(out)
    lines = [o.read_text().splitlines() for o in outputs]
    differ = [i for i, (x, y) in enumerate(zip(*lines)) if x != y]
    assert len(lines[0]) == len(lines[1]) and all(lines[0][i].startswith(paper_report.DATE_PREFIX) for i in differ)
    pngs = [sorted((o.parent / "img").glob("*.png")) for o in outputs]
    assert [p.name for p in pngs[0]] == [p.name for p in pngs[1]] and pngs[0]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(*pngs))


def test_every_cpu_and_paper_cell_names_an_existing_experiment(capsys):
    experiments = {str(p.relative_to(ROOT / "conf" / "experiment"))[:-5]
                   for p in (ROOT / "conf" / "experiment").rglob("*.yaml")}
    for table in TABLES.values():
        for scale in ("cpu", "paper"):
            for cell in cells_at(table, scale):
                assert getattr(cell, scale) in experiments, f"{table.key}: {getattr(cell, scale)} has no config"
    run_cells.main(["--scale", "cpu", "--table", "lm", "--seeds", "1,2", "--dry-run", "--records", "/nonexistent"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("python train.py experiment=cpu/ptb_sru seed=1")
    assert len(printed) == 8  # SRU, LSTM, SRU++, Transformer x 2 seeds
    run_cells.main(["--scale", "cpu", "--cell", "cpu/ptb_lstm", "--seeds", "3", "--dry-run", "--records", "/x"])
    assert capsys.readouterr().out.splitlines() == [
        "python train.py experiment=cpu/ptb_lstm seed=3  hydra.run.dir=outputs/paper/cpu/cpu/ptb_lstm/seed3"]
    run_cells.main(["--scale", "cpu", "--cell", "cpu/ptb_lstm,cpu/ptb_sru", "--seeds", "3", "--dry-run", "--records", "/x"])
    assert len(capsys.readouterr().out.splitlines()) == 2  # a comma list names two cells
    with pytest.raises(SystemExit, match="--cell cpu/ptb_lsmt: no such cpu cell .*cpu/ptb_lstm"):  # not "0 ran"
        run_cells.main(["--scale", "cpu", "--cell", "cpu/ptb_lsmt", "--dry-run", "--records", "/x"])


def test_a_cell_with_a_record_is_not_rerun(tmp_path):
    record = run_cells.record_dir(tmp_path / "runs", "cpu", "cpu/ptb_sru", 1)
    assert record == tmp_path / "runs" / "cpu" / "ptb_sru" / "seed1"
    record.mkdir(parents=True)
    (record / "results.json").write_text("{}")
    assert run_cells.run_cell("cpu/ptb_sru", 1, tmp_path / "scratch", [], record) == "done"
    assert not (tmp_path / "scratch").exists()


def test_a_cell_another_live_process_trains_is_skipped_untouched(tmp_path):
    """Two reproduce processes on one cell: the second must not rename, rewrite or record the first's run dir."""
    import os
    import socket
    run_dir = tmp_path / "scratch"
    run_dir.mkdir()
    (run_dir / "cell.json").write_text('{"config": {"model": "another"}}')
    (run_dir / "run.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    record = run_cells.record_dir(tmp_path / "runs", "cpu", "cpu/ptb_sru", 1)
    assert run_cells.run_cell("cpu/ptb_sru", 1, run_dir, [], record) == "busy"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch"]  # not set aside, no record
    assert (run_dir / "cell.json").read_text() == '{"config": {"model": "another"}}'
    # a lock its owner left behind (a pid that no longer exists) does not block the cell: the dir, trained
    # under another config, is set aside and the cell starts (here to fail fast on a bad override)
    (run_dir / "run.lock").write_text(json.dumps({"pid": 2 ** 22 + 12345, "host": socket.gethostname()}))
    assert run_cells.run_cell("cpu/ptb_sru", 1, run_dir, ["trainer.max_steps=0"], record) == "failed"
    assert (tmp_path / "scratch.stale1" / "cell.json").is_file() and (run_dir / "failure.json").is_file()


@pytest.mark.slow  # trains: real forward + backward steps, timed
@pytest.mark.parametrize("model", ["sru", "lstm"])
def test_recurrent_share_is_the_encoders_part_of_a_real_step(model):
    """python -m reproduce.recurrent_share on the fixture LM: the encoder's replayed forward+backward is a real,
    positive part of the measured step, and it grows with the encoder (a 256 x 4 encoder does ~100x the
    arithmetic of a 32 x 2 one; the fixture LM's step is nearly all encoder, so its share is close to 1
    for both and cannot order them under load: the encoder's own time can, with a wide margin)."""
    from conftest import compose, tiny_lm_overrides
    from reproduce.recurrent_share import measure

    small = measure(compose(tiny_lm_overrides(model) + ["trainer.num_threads=1"]), batches=6)
    wide = measure(compose(tiny_lm_overrides(model) + ["trainer.num_threads=1", "model.hidden_size=256",
                                                       "model.num_layers=4"]), batches=6)
    assert small["batches"] == wide["batches"] == 6
    assert 0 < small["share"] < 1.5 and 0 < wide["share"] < 1.5  # a replay may cost a little more than in-step
    assert wide["recurrent_cpu_s_per_step"] > 3 * small["recurrent_cpu_s_per_step"]


@pytest.mark.slow
def test_reproduce_writes_records_that_the_report_reads_and_never_reruns(tmp_path, capsys):
    """Two real (tiny) cells end to end: each finished (cell, seed) leaves config.yaml, results.json,
    metrics_valid.csv and run.json (no checkpoints); a second call runs nothing; the report reads them."""
    from conftest import LM_FIXTURE

    overrides = ["--", "task.data.source=files", f"task.data.train_file={LM_FIXTURE / 'train.txt'}",
                 f"task.data.valid_file={LM_FIXTURE / 'valid.txt'}", f"task.data.test_file={LM_FIXTURE / 'test.txt'}",
                 "task.data.max_train_tokens=null", "task.batch_size=4", "task.eval_batch_size=4", "task.bptt=8",
                 "model.hidden_size=16", "trainer.max_epochs=2", "trainer.progress_bar=false",
                 "trainer.num_threads=1", "trainer.plot=false"]
    argv = ["--scale", "cpu", "--cell", "cpu/ptb_sru", "--cell", "cpu/ptb_lstm", "--seeds", "1",
            "--out", str(tmp_path / "scratch"), "--records", str(tmp_path / "runs"),
            "--report", str(tmp_path / "paper.md"), *overrides]
    assert set(run_cells.main(argv).values()) == {"ran"}
    for cell in ("ptb_sru", "ptb_lstm"):
        record = tmp_path / "runs" / "cpu" / cell / "seed1"
        assert sorted(p.name for p in record.iterdir()) == ["config.yaml", "metrics_valid.csv", "results.json",
                                                           "run.json"]
        info = json.loads((record / "run.json").read_text())
        assert info["cpu_s"] > 0 and info["epochs"] == 2 and 0 < info["recurrent_share"]["share"]
        assert info["budget"]["max_epochs"] == 2 and info["command"].startswith(f"python train.py experiment=cpu/{cell}")
        assert len((record / "metrics_valid.csv").read_text().splitlines()) == 3  # header + 2 evaluations
    assert set(run_cells.main(argv).values()) == {"done"}
    text = (tmp_path / "paper.md").read_text()
    assert "| SRU 6x910 | 60.3 |" in text and "x vs LSTM 2x910 (per epoch) |" in text


@pytest.mark.slow
def test_a_scratch_run_of_another_config_is_set_aside_not_recorded(tmp_path, capsys):
    """A withdrawn record whose preset changed since: the old scratch run (finished under the old config) must
    not be reported as the new cell; it is moved aside and the cell trains afresh."""
    from conftest import LM_FIXTURE

    data = ["task.data.source=files", f"task.data.train_file={LM_FIXTURE / 'train.txt'}",
            f"task.data.valid_file={LM_FIXTURE / 'valid.txt'}", f"task.data.test_file={LM_FIXTURE / 'test.txt'}",
            "task.data.max_train_tokens=null", "task.batch_size=4", "task.eval_batch_size=4", "task.bptt=8",
            "trainer.max_epochs=1", "trainer.progress_bar=false", "trainer.num_threads=1", "trainer.plot=false"]
    run_dir, record = tmp_path / "scratch" / "seed1", tmp_path / "runs" / "seed1"
    assert run_cells.run_cell("cpu/ptb_lstm", 1, run_dir, data + ["model.num_layers=3"], record) == "ran"
    shutil.rmtree(record)  # the record is withdrawn; the preset changes to 2 layers
    assert run_cells.run_cell("cpu/ptb_lstm", 1, run_dir, data + ["model.num_layers=2"], record) == "ran"
    assert "trained under another config" in capsys.readouterr().out
    assert (tmp_path / "scratch" / "seed1.stale1" / "results.json").is_file()  # kept, not deleted
    saved = json.loads((run_dir / "cell.json").read_text())["config"]
    assert saved["model"]["num_layers"] == 2 and "num_layers: 2" in (record / "config.yaml").read_text()
    assert run_cells.run_cell("cpu/ptb_lstm", 1, run_dir, data + ["model.num_layers=2"], record) == "done"


def test_each_cell_is_compared_with_its_own_baseline():
    classification = TABLES["classification"]
    trec_sru = next(c for c in classification.cells if c.name == "TREC SRU 2 layers")
    assert classification.baseline_of(trec_sru).name == "TREC LSTM"  # not the table's first LSTM (MR's)
    lm_char = TABLES["lm_char"]
    by_name = {c.name: c for c in lm_char.cells}
    assert lm_char.baseline_of(by_name["SRU++ 6 layers"]).name == "Transformer 6 layers"
    assert lm_char.baseline_of(by_name["SRU 6 layers"]).name == "LSTM 2 layers"
    assert lm_char.baseline_of(by_name["Transformer 6 layers"]) is None  # a baseline of its own


def test_cell_clock_keeps_the_time_of_a_run_that_is_killed_and_resumed(tmp_path):
    """cell.json holds the time so far while a cell trains, so a cell killed mid-run and resumed adds it up."""
    import time

    path = tmp_path / "cell.json"
    path.write_text(json.dumps({"experiment": "x", "wall_s": 0.0, "cpu_s": 0.0}))
    clock = run_cells.CellClock(path, every=0.02).__enter__()
    time.sleep(0.2)
    deadline = time.time() + 5.0  # a loaded machine may wake the clock's thread late: wait for its write
    while (seen := json.loads(path.read_text())["wall_s"]) < 0.1 and time.time() < deadline:
        time.sleep(0.02)
    assert 0.1 <= seen < 1.0  # written by the clock while "training" (a kill here keeps it)
    clock.__exit__(None, None, None)
    with run_cells.CellClock(path, every=10.0):  # the resumed part
        time.sleep(0.1)
    cell = json.loads(path.read_text())
    assert cell["wall_s"] >= seen + 0.1 and cell["experiment"] == "x" and cell["cpu_s"] >= 0


@pytest.mark.slow
def test_bench_cells_times_every_cell_against_its_baseline(capsys, tmp_path):
    from reproduce import cell_bench as bench_cells
    ratios = bench_cells.main(["--table", "lm_char", "--steps", "1", "--rounds", "2", "--write", str(tmp_path)])
    assert set(ratios) == {c.name for c in cells_at(TABLES["lm_char"], "cpu")}
    assert ratios["LSTM 2 layers"] == ratios["Transformer 6 layers"] == 1.0  # baselines of their own
    assert all(r > 0 for r in ratios.values())
    out = capsys.readouterr().out
    assert "| SRU++ 6 layers | 0.65M |" in out and "| Transformer 6 layers |" in out
    saved = json.loads((tmp_path / "cpu" / "lm_char.json").read_text())  # what paper_report reads
    assert set(saved["cells"]) == set(ratios) and saved["cells"]["SRU++ 6 layers"]["cpu_ms_per_step"] > 0
    assert saved["command"].startswith("python -m reproduce.cell_bench --table lm_char")


def test_the_stopped_column_summarises_a_cells_runs():
    """Three seeds' ends in a few words: counts of early stops, the range of the budget runs' last-quarter gains."""
    end = paper_report.RunEnd
    assert paper_report.stopped_text([end("early")] * 3) == "early (3/3)"
    assert (paper_report.stopped_text([end("budget", 3.6)])
            == "budget, last quarter 3.60% (**1 over the 1% rule**)")
    three = [end("budget", 0.4), end("early"), end("budget", 0.99)]
    assert paper_report.stopped_text(three) == "early (1/3); budget (2/3), last quarter 0.40-0.99%"
    assert (paper_report.stopped_text(three[:1] * 2, monitor="cer")
            == "budget (2/2), last quarter 0.40% in valid cer")
    assert (paper_report.stopped_text([end("early"), end("budget (too few evaluations)")])
            == "early (1/2); budget (too few evaluations)")
    # a gain is judged as it is shown: 0.996% reads "1.00%", and is flagged
    assert paper_report.stopped_text([end("budget", 0.996)]) == "budget, last quarter 1.00% (**1 over the 1% rule**)"


def test_a_later_seed_is_checked_against_the_first_three(tmp_path):
    records = tmp_path / "runs"
    for seed, test in ((1, 200.0), (2, 210.0), (3, 205.0), (4, 207.0), (5, 230.0)):
        _record(records, "ptb_sru", seed, test, [400, test + 40])
    text = paper_report.main(["--records", str(records), "--out", str(tmp_path / "paper.md"), "--bench", ""])
    assert ("Reproduction check, SRU 6x910: seed 4 gives ppl 207.00, inside seeds 1-3' mean ± 2 std "
            "(205.00 ± 10.00)") in text
    assert "Reproduction check, SRU 6x910: seed 5 gives ppl 230.00, **outside** seeds 1-3'" in text
    # with three seeds mean ± 2 std is narrow; the 95% prediction interval is t(2) = 4.303 x 5 x sqrt(4/3)
    assert "(205.00 ± 10.00), inside their 95% prediction interval for one more seed (205.00 ± 24.84)" in text
    assert "(205.00 ± 10.00), **outside** their 95% prediction interval for one more seed (205.00 ± 24.84)" in text


def test_a_record_names_the_commit_it_ran_at():
    """run.json's commit is HEAD of the checkout (it was "" while ROOT pointed one folder above it)."""
    import re

    from reproduce.run_cells import ROOT as CHECKOUT
    from reproduce.run_cells import git_commit
    assert (CHECKOUT / "reproduce" / "run_cells.py").is_file()
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", git_commit())
