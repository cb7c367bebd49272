"""Smoke tests of scripts/bench_srupp.py (without --official: the official package is not
installed in CI) and scripts/check_gpu_srupp.py (--device cpu). No timing asserts."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a subprocess: ~10 s of imports
def test_tiny_run_writes_json_and_markdown(tmp_path):
    cmd = [sys.executable, str(REPO / "scripts" / "bench_srupp.py"), "--threads", "1",
           "--length", "6", "--batch", "2", "--hidden", "8", "--proj", "4", "--repeats", "2",
           "--warmup", "1", "--min-ms", "0", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((tmp_path / "srupp.json").read_text())["rows"]
    assert {(r["mode"], r["candidate"]) for r in rows} == {
        (m, c) for m in ("train_step", "forward") for c in ("srupp", "sru", "transformer")}
    assert all(r["median_ms"] > 0 for r in rows)
    assert "| train_step | srupp |" in (tmp_path / "srupp.md").read_text()


@pytest.mark.slow  # a subprocess: imports, torch.compile
def test_gpu_check_script_passes_on_cpu(tmp_path):
    """scripts/check_gpu_srupp.py is prepared for a GPU machine; --device cpu runs the same checks."""
    cmd = [sys.executable, str(REPO / "scripts" / "check_gpu_srupp.py"), "--device", "cpu",
           "--speed-shape", "8,2,16,8,1", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed"] == [] and len([k for k in summary["checks"] if k.startswith("official/")]) == 9
