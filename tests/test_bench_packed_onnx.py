"""bench.packed and bench.onnx_speed (python -m bench.packed, python -m bench.onnx_speed) run end to end at
tiny sizes and print their tables (the numbers themselves are recorded in docs/benchmarks.md, never
asserted)."""
import pytest

from bench import onnx_speed as bench_onnx
from bench import packed as bench_packed


def test_bench_packed_prints_every_candidate(capsys):
    bench_packed.main(["--length", "8", "--batch", "3", "--size", "8", "--layers", "1",
                       "--threads", "1", "--repeats", "2", "--warmup", "0"])
    out = capsys.readouterr().out
    for name in ("sru_padded", "sru_packed", "lstm_packed"):
        assert f"| {name} |" in out
    assert "real tokens of 24 padded positions" in out


def test_bench_packed_batch_is_padded_to_the_longest():
    x, mask_pad, lengths, packed = bench_packed.make_batch(16, 5, 4, seed=0)
    assert int(lengths.max()) == 16 and bool((lengths >= 4).all())
    assert int(packed.batch_sizes.sum()) == int(lengths.sum()) == int((~mask_pad).sum())
    assert float(x[mask_pad].abs().sum()) == 0.0


@pytest.mark.slow
def test_bench_onnx_runs_both_workloads(tmp_path, capsys):
    pytest.importorskip("onnxruntime", reason="the export extra is not installed")
    pytest.importorskip("onnxscript", reason="the export extra is not installed")
    bench_onnx.main(["--size", "8", "--layers", "1", "--threads", "1", "--repeats", "1",
                     "--min-ms", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| step B=1" in out and "| seq L=64 B=32" in out
    assert (tmp_path / "step.onnx").exists() and (tmp_path / "seq.onnx").exists()
