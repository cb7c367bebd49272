"""The layer speed benchmark (bench.speed, python -m bench.speed): it runs end to end on a tiny grid
and writes its JSON, markdown and figure. No assertion on how fast anything is – CI machines are too
noisy for that – but the reported times must be the times the samples hold."""
import json
import statistics
import subprocess

import pytest

from bench import decode as bench_decode
from bench import registry as bench_registry
from bench import speed as bench_speed
from bench import speed_report
from bench.harness import make_timer, module_command
from conftest import ROOT as REPO


@pytest.mark.slow
def test_tiny_grid_writes_json_markdown_and_png(tmp_path):
    from sru.ops import available_backends

    out = tmp_path / "bench"
    cmd, env = module_command("bench.speed", "--device", "cpu", "--threads", "1", "--shapes", "tiny",
                              "--repeats", "3", "--warmup", "1", "--min-ms", "0", "--profile", "--out", str(out))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    report = json.loads((out / "bench.json").read_text())
    rows = report["results"]
    errors = {r["candidate"]: r["error"] for r in rows if "error" in r}
    assert not errors, errors
    sru_expected = {f"sru-{b}" for b in available_backends() if b != "triton"}
    assert sru_expected, "sru.ops reports no CPU backend"
    expected = {"gemm-bound", "gemm-bound-onednn", "conv1d-k3", "lstm"} | sru_expected  # fp32 on CPU: both GEMM libraries
    assert {r["candidate"] for r in rows} == expected
    for r in rows:
        for mode in ("forward", "train_step"):
            t = r[mode]
            # three rounds of one call each, and the reported statistics are those of the samples: a
            # timer that returned nothing, a constant, or stats of other samples would fail here
            assert len(t["samples_ms"]) == 3 and t["calls_per_sample"] == 1
            assert t["median_ms"] == pytest.approx(statistics.median(t["samples_ms"]), abs=1e-3)
            assert min(t["samples_ms"]) <= t["q25_ms"] <= t["median_ms"] <= t["q75_ms"] <= max(t["samples_ms"])
            assert all(0.0005 < v < 10_000 for v in t["samples_ms"]), t  # a real call takes microseconds at least
        if r["candidate"] == "gemm-bound":
            assert r["train_step"]["vs_gemm"] == pytest.approx(1.0)
    # every ratio is the median of the per-round ratios of the samples it reports
    by_name = {r["candidate"]: r for r in rows}
    for r in rows:
        for mode in ("forward", "train_step"):
            per_round = [a / b for a, b in zip(r[mode]["samples_ms"], by_name["gemm-bound"][mode]["samples_ms"])]
            assert r[mode]["vs_gemm"] == pytest.approx(statistics.median(per_round))
            per_round = [a / b for a, b in zip(by_name["lstm"][mode]["samples_ms"], r[mode]["samples_ms"])]
            assert r[mode]["speedup_vs_lstm"] == pytest.approx(statistics.median(per_round))
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


def test_the_cpu_grid_has_eight_shapes_and_its_bound_reads_the_layers_widths():
    """--shapes grid: 8 shapes, one bidirectional and one with layer norm; the GEMM bound's products are
    the SRU's own (a bidirectional first layer is d x 2 * 4d, k = 4 as its input is narrower than its output)."""
    grid = bench_registry.shapes_for("grid", "cpu")
    assert len(grid) == 8 and len({s.label for s in grid}) == 8
    assert sum(s.bidirectional for s in grid) == 1 and sum(s.layer_norm for s in grid) == 1
    bidir = bench_registry.Shape(4, 2, 8, 2, bidirectional=True)
    assert bench_registry.sru_projection_widths(bidir) == [(8, 64), (16, 48)]
    cand = bench_registry.build_candidates(bidir, "cpu", "fp32", backends=["cpu"])["sru-cpu"]()
    cand.train_step()
    assert all(t.grad is not None for t in cand.leaves)


def test_unknown_shape_grid_is_one_clear_error():
    with pytest.raises(ValueError, match="expected one of"):
        bench_registry.shapes_for("huge", "cpu")


def test_judged_targets_report_met_and_missed():
    shape = bench_registry.JUDGED_SHAPE
    row = {"shape": {"label": shape.label}, "dtype": "fp32", "candidate": "sru-cpu",
           "train_step": {"vs_gemm": 1.10, "speedup_vs_lstm": 2.0},
           "forward": {"vs_gemm": 1.30, "speedup_vs_lstm": 3.0}}
    text = speed_report.judged_targets([row])
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
    bench_speed.main(["--decode", "--threads", "1", "--repeats", "2", "--warmup", "1", "--min-ms", "0",
                      "--out", str(out)])
    rows = json.loads((out / "decode.json").read_text())["results"]
    names = {"matmuls", "sru (inference_mode)", "sru (no_grad)", "lstm", "srupp-matmuls", "srupp"}
    assert {(r["batch"], r["candidate"]) for r in rows} == {
        (b, n) for b in bench_decode.DECODE_BATCHES for n in names}
    for r in rows:
        assert len(r["samples_ms"]) == 2
        assert r["median_ms"] == pytest.approx(statistics.median(r["samples_ms"]), abs=1e-3)
        assert r["min_ms"] == min(r["samples_ms"]) > 0
        assert r["floor"] == ("srupp-matmuls" if r["candidate"].startswith("srupp") else "matmuls")
        if r["candidate"] in ("matmuls", "srupp-matmuls"):
            assert r["vs_matmuls"] == pytest.approx(1.0) and r["vs_matmuls_min"] == pytest.approx(1.0)
    text = (out / "decode.md").read_text()
    assert "| 1 | sru (inference_mode) |" in text and "| 32 | srupp |" in text
    # the step profile: every part per batch size, the whole step first, the path each batch took
    profile = json.loads((out / "decode.json").read_text())["profile"]
    assert set(profile) == {str(b) for b in bench_decode.DECODE_BATCHES}
    for parts in profile.values():
        assert parts[0]["part"].startswith("whole step") and parts[0]["share"] == pytest.approx(1.0)
        assert parts[0]["path"] in ("one C call", "routed") and all(p["us"] == p["us"] for p in parts)
    assert "Where one SRU step's µs go (B = 1: " in text
    # the SRU++ step's profile beside it (the one-call step where this build has it)
    srupp = json.loads((out / "decode.json").read_text())["srupp_profile"]
    if srupp:
        assert set(srupp) == {str(b) for b in bench_decode.DECODE_BATCHES}
        for parts in srupp.values():
            assert parts[0]["part"].startswith("whole step") and parts[0]["share"] == pytest.approx(1.0)
            assert any(p["part"].strip().startswith("the C call") and p["us"] > 0 for p in parts)
        assert "Where one SRU++ step's µs go (B = 1: " in text


def test_official_package_directory_that_is_missing_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="pip install --no-deps --target"):
        bench_decode.load_official(str(tmp_path / "nowhere"))


def test_cpu_timer_counts_this_threads_cpu_time_and_needs_one_thread():
    with pytest.raises(SystemExit):
        bench_speed.parse_args(["--timer", "cpu", "--threads", "2"])
    timer = make_timer("cpu", "cpu")
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
    """bench.processes reruns bench.speed in fresh processes; every ratio comes back once
    per process, with its median."""
    import statistics

    from bench import processes

    out = tmp_path / "procs"
    processes.main(["--processes", "2", "--out", str(out), "--", "--device", "cpu", "--threads", "1",
                    "--shapes", "tiny", "--repeats", "1", "--warmup", "1", "--min-ms", "0",
                    "--candidates", "gemm-bound,sru-cpu"])
    summary = json.loads((out / "summary.json").read_text())
    ratios = [r for r in summary["ratios"] if r["candidate"] == "sru-cpu" and r["ratio"] == "inference / GEMM"]
    assert ratios, summary["ratios"]
    for r in ratios:
        assert len(r["per_process"]) == 2 and all(v > 0 for v in r["per_process"])
        assert r["median"] == statistics.median(r["per_process"])
    assert (out / "process_0" / "bench.json").exists() and (out / "process_1" / "bench.json").exists()
    assert "| sru-cpu | inference / GEMM |" in (out / "summary.md").read_text()


def test_processes_refuse_an_out_for_bench_speed(tmp_path, capsys):
    from bench import processes

    with pytest.raises(SystemExit) as exit_:
        processes.parse_args(["--", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and "pass --out to this script" in capsys.readouterr().err


def test_versions_refuses_a_tree_without_the_layer(tmp_path, capsys):
    """bench.versions (old tree vs new tree) names the directory that holds no sru/ and the fix."""
    from bench import versions

    with pytest.raises(SystemExit):
        versions.parse_args(["--old", str(tmp_path), "--new", "."])
    assert f"{tmp_path}: no sru/__init__.py there; pass the root of a checkout" in capsys.readouterr().err
