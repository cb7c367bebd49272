"""Smoke test of the layer speed benchmark: it runs end to end on a tiny grid and writes its
JSON, markdown and figure. No timing assertions – CI machines are too noisy for that."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import bench_decode  # noqa: E402
import bench_registry  # noqa: E402
import bench_speed  # noqa: E402


@pytest.mark.slow
def test_tiny_grid_writes_json_markdown_and_png(tmp_path):
    from sru.ops import available_backends

    out = tmp_path / "bench"
    cmd = [sys.executable, str(REPO / "scripts" / "bench_speed.py"), "--device", "cpu", "--threads", "1",
           "--shapes", "tiny", "--repeats", "1", "--warmup", "1", "--min-ms", "0", "--profile",
           "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    report = json.loads((out / "bench.json").read_text())
    rows = report["results"]
    errors = {r["candidate"]: r["error"] for r in rows if "error" in r}
    assert not errors, errors
    sru_expected = {f"sru-{b}" for b in available_backends() if b != "triton"}
    assert sru_expected, "sru.ops reports no CPU backend"
    expected = {"gemm-bound", "conv1d-k3", "lstm"} | sru_expected
    assert {r["candidate"] for r in rows} == expected
    for r in rows:
        for mode in ("forward", "train_step"):
            assert r[mode]["median_ms"] > 0 and len(r[mode]["samples_ms"]) == 1
        if r["candidate"] == "gemm-bound":
            assert r["train_step"]["vs_gemm"] == pytest.approx(1.0)
    assert report["machine"]["threads"] == 1

    table = (out / "bench.md").read_text()
    for name in expected:
        assert f"| {name} |" in table
    assert (out / "speed.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out.glob("profile_*.txt")) == sorted(
        f"profile_fp32_8x4x32x2_{name}.txt" for name in sru_expected)


@pytest.mark.parametrize("name", ["gemm-bound", "conv1d-k3", "lstm"])
def test_train_step_fills_grads_of_parameters_and_input(name):
    """Every candidate's training step back-propagates into its input too (the GEMM bound:
    grad of x and of W for every layer), so the comparison is like for like."""
    shape = bench_registry.Shape(4, 2, 8, 2)
    cand = bench_registry.build_candidates(shape, "cpu", "fp32", backends=[])[name]()
    cand.train_step()
    if name == "gemm-bound":
        assert len(cand.leaves) == 2 * shape.layers  # one x and one W per layer
    assert all(t.grad is not None and t.grad.shape == t.shape for t in cand.leaves)


def test_summary_statistics_are_median_and_quartiles():
    stats = bench_speed.summarize([0.004, 0.001, 0.002, 0.003, 0.005])  # seconds
    assert stats["median_ms"] == pytest.approx(3.0)
    assert (stats["q25_ms"], stats["q75_ms"]) == (pytest.approx(2.0), pytest.approx(4.0))


def test_unknown_shape_grid_is_one_clear_error():
    with pytest.raises(ValueError, match="expected one of"):
        bench_registry.shapes_for("huge", "cpu")


def test_judged_targets_report_met_and_missed():
    shape = bench_registry.JUDGED_SHAPE
    row = {"shape": {"label": shape.label}, "dtype": "fp32", "candidate": "sru-cpu",
           "train_step": {"vs_gemm": 1.10, "speedup_vs_lstm": 2.0},
           "forward": {"vs_gemm": 1.30, "speedup_vs_lstm": 3.0}}
    text = bench_speed.judged_targets([row])
    assert "fwd+bwd / GEMM 1.10x (target <= 1.15x: met)" in text
    assert "fwd / GEMM 1.30x (target <= 1.1x: NOT met)" in text
    assert "speedup vs LSTM 2.00x (target >= 2.4x: NOT met)" in text


def test_ratios_are_paired_per_round():
    """Load drifting between rounds slows both candidates of a round alike; pairing cancels
    it, where the ratio of the two medians (here 3.3 / 2.0) would not."""
    def row(name, samples):
        timing = {"samples_ms": samples, "median_ms": sorted(samples)[1]}
        return {"shape": {"label": "s"}, "dtype": "fp32", "candidate": name,
                "forward": dict(timing), "train_step": dict(timing)}

    rows = [row("gemm-bound", [1.0, 3.0, 2.0]), row("lstm", [4.0, 12.0, 8.0]),
            row("sru-cpu", [1.1, 3.3, 4.0])]
    bench_speed.add_ratios(rows)
    sru = rows[2]["train_step"]
    assert sru["vs_gemm"] == pytest.approx(1.1)
    assert sru["speedup_vs_lstm"] == pytest.approx(4.0 / 1.1)


@pytest.mark.slow
def test_decode_mode_times_every_candidate_per_batch(tmp_path):
    out = tmp_path / "decode"
    cmd = [sys.executable, str(REPO / "scripts" / "bench_speed.py"), "--decode", "--threads", "1",
           "--repeats", "2", "--warmup", "1", "--min-ms", "0", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((out / "decode.json").read_text())["results"]
    names = {"matmuls", "sru (inference_mode)", "sru (no_grad)", "lstm"}
    assert {(r["batch"], r["candidate"]) for r in rows} == {
        (b, n) for b in bench_decode.DECODE_BATCHES for n in names}
    for r in rows:
        assert r["median_ms"] > 0 and len(r["samples_ms"]) == 2
        assert 0 < r["min_ms"] <= r["median_ms"]
        if r["candidate"] == "matmuls":
            assert r["vs_matmuls"] == pytest.approx(1.0) and r["vs_matmuls_min"] == pytest.approx(1.0)
    assert "| 1 | sru (inference_mode) |" in (out / "decode.md").read_text()


def test_official_package_directory_that_is_missing_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="pip install --no-deps --target"):
        bench_decode.load_official(str(tmp_path / "nowhere"))


def test_cpu_timer_counts_this_threads_cpu_time_and_needs_one_thread():
    with pytest.raises(SystemExit):
        bench_speed.parse_args(["--timer", "cpu", "--threads", "2"])
    timer = bench_speed.make_timer("cpu", "cpu")
    import time

    def spin(seconds):  # burn exactly this much of this thread's CPU time
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    assert timer(lambda: time.sleep(0.01), 2) < 0.005  # sleeping uses no CPU
    # seconds per call (not per batch of calls), whatever else runs on the machine
    assert timer(lambda: spin(0.02), 3) == pytest.approx(0.02, rel=0.25)


@pytest.mark.slow
def test_processes_report_each_process_and_the_median(tmp_path):
    """bench_processes.py reruns bench_speed.py in fresh processes; every ratio comes back once
    per process, with its median."""
    import statistics

    out = tmp_path / "procs"
    cmd = [sys.executable, str(REPO / "scripts" / "bench_processes.py"), "--processes", "2", "--out", str(out),
           "--", "--device", "cpu", "--threads", "1", "--shapes", "tiny", "--repeats", "1", "--warmup", "1",
           "--min-ms", "0", "--candidates", "gemm-bound,sru-cpu"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    ratios = [r for r in summary["ratios"] if r["candidate"] == "sru-cpu" and r["ratio"] == "inference / GEMM"]
    assert ratios, summary["ratios"]
    for r in ratios:
        assert len(r["per_process"]) == 2 and all(v > 0 for v in r["per_process"])
        assert r["median"] == statistics.median(r["per_process"])
    assert (out / "process_0" / "bench.json").exists() and (out / "process_1" / "bench.json").exists()
    assert "| sru-cpu | inference / GEMM |" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_processes_refuse_an_out_for_bench_speed(tmp_path):
    cmd = [sys.executable, str(REPO / "scripts" / "bench_processes.py"), "--", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and "pass --out to this script" in proc.stderr
