"""Smoke tests of bench.srupp (python -m bench.srupp; without --official: the official package is not
installed in CI) and bench.srupp_check (python -m bench.srupp_check, --device cpu). No timing asserts."""
import json
import statistics

import pytest

from bench import srupp, srupp_check


def test_tiny_run_writes_json_and_markdown(tmp_path):
    srupp.main(["--threads", "1", "--length", "6", "--batch", "2", "--hidden", "8", "--proj", "4",
                "--repeats", "2", "--warmup", "1", "--min-ms", "0", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "srupp.json").read_text())["rows"]
    assert {(r["mode"], r["candidate"]) for r in rows} == {
        (m, c) for m in ("train_step", "forward") for c in ("srupp", "sru", "transformer")}
    for r in rows:
        assert len(r["samples_ms"]) == 2
        assert r["median_ms"] == pytest.approx(statistics.median(r["samples_ms"]), abs=1e-3)
        if r["candidate"] == "srupp":
            assert r["vs_srupp"] == 1.0
    assert "| train_step | srupp |" in (tmp_path / "srupp.md").read_text()


@pytest.mark.slow  # torch.compile
def test_gpu_check_passes_on_cpu(tmp_path):
    """check_gpu_srupp is prepared for a GPU machine; --device cpu runs the same checks."""
    assert srupp_check.main(["--device", "cpu", "--speed-shape", "8,2,16,8,1", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed"] == [] and len([k for k in summary["checks"] if k.startswith("official/")]) == 9
    assert set(summary["checks"]["speed"]) == {f"{m}/{mode}_ms" for m in ("srupp", "transformer")
                                               for mode in ("train_step", "forward")}
