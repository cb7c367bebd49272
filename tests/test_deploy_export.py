"""torch.export and AOTInductor of SRU and SRUpp, with the fused CPU kernel in the graph, from
Python and from C++ (docs/deploy.md). Tests that build the sru_cpp op library, compile a package
or a C++ program are in the slow tier."""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch

from sru import SRU, SRUpp
from sru.deploy import compile_package, export, load_package, main as deploy_main
from tests.sru_helpers import randomize

ROOT = Path(__file__).resolve().parents[1]


def _targets(program):
    return {str(node.target) for node in program.graph.nodes if node.op == "call_function"}


def _assert_same(expected, got, atol=1e-5):
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, atol=atol, rtol=1e-5)


def test_decomposed_export_without_the_op_library(monkeypatch):
    """SRU_EXPORT_FUSED=0: the recurrence exports as a scan (what ONNX gets), no library."""
    monkeypatch.setenv("SRU_EXPORT_FUSED", "0")
    model = randomize(SRU(8, 4, num_layers=2, bidirectional=True)).eval()
    program = export(model, torch.randn(5, 2, 8))
    targets = _targets(program)
    assert not any(t.startswith("sru_cpp.") for t in targets)
    assert any("scan" in t for t in targets)
    x = torch.randn(9, 3, 8)
    with torch.no_grad():
        _assert_same(model(x), program.module()(x))


def test_deploy_command_rejects_bad_arguments_in_one_line(capsys):
    assert deploy_main(["nonsense"]) == 2
    assert capsys.readouterr().err.strip() == "usage: python -m sru.deploy op-library"


@pytest.mark.slow
@pytest.mark.parametrize("options", [dict(bidirectional=True, layer_norm=True, projection_size=3),
                                     dict(rescale=True, normalize_after=True, layer_norm=True)])
def test_export_records_the_fused_op_with_dynamic_shapes(options):
    model = randomize(SRU(8, 4, num_layers=2, **options)).eval()
    program = export(model, torch.randn(5, 2, 8))
    targets = _targets(program)
    assert "sru_cpp.recurrence_forward.default" in targets
    assert not any("scan" in t for t in targets)
    for shape in ((9, 3, 8), (1, 1, 8)):  # other lengths and batches than the example
        x = torch.randn(*shape)
        with torch.no_grad():
            _assert_same(model(x), program.module()(x))


@pytest.mark.slow
def test_export_keeps_c0_and_mask_pad():
    model = randomize(SRU(8, 4, num_layers=2, bidirectional=True)).eval()
    x, c0 = torch.randn(6, 3, 8), torch.randn(2, 3, 8)
    mask = torch.zeros(6, 3, dtype=torch.bool)
    mask[4:, 2] = True
    with torch.no_grad():
        program = torch.export.export(model, (x, c0, mask))
        assert "sru_cpp.recurrence_forward.default" in _targets(program)
        _assert_same(model(x, c0, mask), program.module()(x, c0, mask))


@pytest.mark.slow
def test_aoti_package_of_a_2x512_sru_calls_the_fused_kernel(tmp_path):
    """Issue 51 item 3: SRU(512, 512, num_layers=2), dynamic length and batch, equal to eager."""
    model = SRU(512, 512, num_layers=2).eval()
    path = compile_package(model, torch.randn(64, 32, 512), tmp_path / "sru.pt2")
    runner = load_package(path)
    for shape in ((64, 32, 512), (10, 3, 512)):
        x = torch.randn(*shape)
        with torch.no_grad():
            _assert_same(model(x), runner(x))
    shutil.unpack_archive(path, tmp_path / "unpacked", format="zip")
    # A fresh process loads it through sru.deploy.load_package (the op library first).
    code = (f"import torch; from sru.deploy import load_package; "
            f"h, c = load_package({str(path)!r})(torch.randn(3, 2, 512)); print(tuple(h.shape))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    assert out.stdout.strip().endswith("(3, 2, 512)")
    wrappers = list((tmp_path / "unpacked").rglob("*.wrapper.cpp"))
    assert wrappers and "sru_cpp.recurrence_forward" in wrappers[0].read_text()
    metadata = runner.get_metadata()
    assert metadata["sru_input_size"] == "512" and Path(metadata["sru_op_library"]).exists()


@pytest.mark.slow
def test_srupp_exports_with_dynamic_shapes_and_compiles(tmp_path):
    """Issue 51 item 5: SRUpp (attention, 2 layers) through export and AOTInductor."""
    model = randomize(SRUpp(16, 16, 8, num_layers=2, num_heads=2), scale=0.3).eval()
    example = torch.randn(5, 2, 16)
    program = export(model, example)
    assert "sru_cpp.recurrence_forward.default" in _targets(program)
    runner = load_package(compile_package(model, example, tmp_path / "srupp.pt2"))
    x = torch.randn(9, 3, 16)
    with torch.no_grad():
        expected = model(x)
        _assert_same(expected[:2], program.module()(x)[:2])
        _assert_same(expected[:2], runner(x)[:2])


def _torch_dirs():
    base = Path(torch.__file__).parent
    return base / "include", base / "include/torch/csrc/api/include", base / "lib"


def build_cpp_example(out: Path) -> Path:
    """The one compiler line of docs/deploy.md#aotinductor-from-c."""
    include, api_include, lib = _torch_dirs()
    binary = out / "run_sru_package"
    subprocess.run([os.environ.get("CXX", "g++"), "-std=c++20", "-O1",
                    str(ROOT / "examples/cpp/run_sru_package.cpp"), "-o", str(binary),
                    f"-I{include}", f"-I{api_include}", f"-L{lib}", f"-Wl,-rpath,{lib}",
                    "-ltorch", "-ltorch_cpu", "-lc10", "-ldl"], check=True)
    return binary


@pytest.mark.slow
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None or
                    sysconfig.get_platform().startswith("win"), reason="no C++ compiler")
def test_cpp_example_runs_the_package_like_python(tmp_path):
    model = randomize(SRU(32, 16, num_layers=2, bidirectional=True), scale=0.3).eval()
    package = compile_package(model, torch.randn(5, 2, 32), tmp_path / "sru.pt2")
    library = subprocess.run([sys.executable, "-m", "sru.deploy", "op-library"], cwd=ROOT,
                             check=True, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT))).stdout.strip()
    binary = build_cpp_example(tmp_path)
    run = subprocess.run([str(binary), package, library, "7", "3", str(tmp_path / "out.bin")],
                         check=True, capture_output=True, text=True)
    assert "h [7, 3, 32] c [2, 3, 32]" in run.stdout
    x = (torch.arange(7 * 3 * 32, dtype=torch.float32) * 0.01).sin().view(7, 3, 32)
    with torch.no_grad():
        h, c = model(x)
    out = np.fromfile(tmp_path / "out.bin", dtype=np.float32)
    np.testing.assert_allclose(out[:h.numel()], h.numpy().ravel(), atol=1e-5)
    np.testing.assert_allclose(out[h.numel():], c.numpy().ravel(), atol=1e-5)
    missing = subprocess.run([str(binary), package, str(tmp_path / "none.so"), "7", "3"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "cannot load the sru op library" in missing.stderr
