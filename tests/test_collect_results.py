"""python -m tasks.engine.sweeps.collect on run dirs laid out as Hydra + the trainer write them."""
import csv
import json
import math
from pathlib import Path

import pytest
import yaml

from tasks.engine.sweeps import collect as collect_results


def make_run(root: Path, name: str, overrides: list, valid: list, test=None, failed=False) -> Path:
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    cfg = {o.split("=")[0]: o.split("=")[1] for o in overrides}
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"trainer": {"lr": cfg.get("trainer.lr")}}))
    lines = [{"split": "train", "step": 10 * (i + 1), "loss": 9.0} for i in range(len(valid))]
    lines += [{"split": "valid", "step": 10 * (i + 1), "ppl": v, "best_ppl": min(valid[:i + 1])}
              for i, v in enumerate(valid)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    if test is not None:  # train.py's summary, written when a run finishes
        summary = {"monitor": "ppl", "best_valid": min(valid), "test": {"ppl": test, "loss": 4.0}}
        (run / "results.json").write_text(json.dumps(summary))
    if failed:
        (run / "failure.json").write_text(json.dumps({"error": "RuntimeError: boom"}))
    return run


@pytest.mark.slow
def test_groups_seeds_and_reports_mean_std_and_failures(tmp_path):
    sweep = tmp_path / "sweep"
    common = ["task=lm", "trainer.max_steps=20"]  # the same in every run: not part of the labels
    make_run(sweep, "0", common + ["trainer.lr=1.0", "seed=1"], [120.0, 100.0], test=98.0)
    make_run(sweep, "1", common + ["trainer.lr=1.0", "seed=2"], [130.0, 110.0], test=102.0)
    make_run(sweep, "2", common + ["trainer.lr=0.1", "seed=1"], [200.0], test=190.0)
    make_run(sweep, "3", common + ["trainer.lr=0.1", "seed=2"], [210.0], failed=True)

    rows = collect_results.main([str(sweep), "--out", str(tmp_path / "out")])

    by_cfg = {r["configuration"]: r for r in rows}
    assert set(by_cfg) == {"trainer.lr=1.0", "trainer.lr=0.1"}
    hi = by_cfg["trainer.lr=1.0"]
    assert (hi["runs"], hi["failed"]) == (2, 0)
    assert hi["valid/best_ppl"] == (105.0, pytest.approx(math.sqrt(50.0)))  # best valid value per run
    assert hi["test/ppl"] == (100.0, pytest.approx(math.sqrt(8.0)))
    lo = by_cfg["trainer.lr=0.1"]
    assert (lo["runs"], lo["failed"]) == (2, 1)  # the failed run is counted, not averaged
    assert lo["test/ppl"] == (190.0, 0.0)
    assert lo["valid/best_ppl"] == (200.0, 0.0)

    out = tmp_path / "out"
    md = (out / "results.md").read_text()
    assert "105 ± 7.1" in md and "Failed runs:" in md and "boom" in md
    with open(out / "results.csv") as fh:
        table = list(csv.DictReader(fh))
    assert {r["configuration"] for r in table} == {"trainer.lr=1.0", "trainer.lr=0.1"}
    with open(out / "runs.csv") as fh:
        assert [r["status"] for r in csv.DictReader(fh)] == ["ok", "ok", "ok", "failed"]
    assert (out / "valid_curves.png").stat().st_size > 1000


def test_metrics_jsonl_only_runs_use_last_logged_values(tmp_path):
    make_run(tmp_path, "a", ["seed=1"], [120.0, 100.0, 110.0])
    rows = collect_results.main([str(tmp_path), "--metrics", "valid/ppl", "valid/best_ppl"])
    assert rows[0]["configuration"] == "(all runs)"
    assert rows[0]["valid/ppl"] == (110.0, 0.0) and rows[0]["valid/best_ppl"] == (100.0, 0.0)


def test_group_by_config_keys_and_explicit_metrics(tmp_path):
    make_run(tmp_path, "a", ["trainer.lr=1.0", "seed=1"], [100.0], test=90.0)
    make_run(tmp_path, "b", ["trainer.lr=1.0", "seed=2", "trainer.max_steps=5"], [110.0], test=92.0)
    rows = collect_results.main([str(tmp_path), "--group-by", "trainer.lr", "--metrics", "test/ppl"])
    assert [(r["configuration"], r["runs"], r["test/ppl"][0]) for r in rows] == [("trainer.lr=1.0", 2, 91.0)]


def test_missing_dir_and_empty_dir_errors(tmp_path):
    with pytest.raises(SystemExit, match="^collect_results: error: run directory .*nope does not exist"):
        collect_results.main([str(tmp_path / "nope")])
    with pytest.raises(SystemExit, match="no runs"):
        collect_results.main([str(tmp_path)])
