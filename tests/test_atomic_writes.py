"""Text files the framework rewrites (metrics after a resume, predictions, sweep tables) are replaced
all at once, and a resume drops exactly the records after its checkpoint's step."""
import json
import os

import pytest

from tasks.engine.run.interrupts import write_text_atomic
from tasks.engine.training.loggers import drop_records_after


def test_write_text_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "hyp.txt"
    path.write_text("old\n")
    write_text_atomic(path, "new ü\n")
    assert path.read_text(encoding="utf-8") == "new ü\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hyp.txt"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    path = tmp_path / "metrics_test.json"
    path.write_text("{}")

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space"):
        write_text_atomic(path, '{"accuracy": 1}')
    assert path.read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics_test.json"]


def test_resume_drops_the_records_after_its_step_and_a_torn_last_line(tmp_path):
    lines = [json.dumps({"step": s, "loss": 1.0 / s}) for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 4, "lo')  # crash mid-write
    (tmp_path / "metrics_valid.csv").write_text("step,loss\n1,0.5\n2,0.4\n3,0.3\n")
    dropped = drop_records_after(tmp_path, 2)
    assert dropped == 3  # steps 3 and the torn 4 in the JSONL, step 3 in the CSV
    assert [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (tmp_path / "metrics_valid.csv").read_text().splitlines() == ["step,loss", "1,0.5", "2,0.4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "metrics_valid.csv"]
