"""The deploy routes against every bad input a new-user probe tried, as a table (slow tier, but for the
docs check: one export, one AOTInductor package and one C++ build for the whole file).

The AOTInductor runner (``sru.deploy.load_package``) and the exported program (``sru.deploy.export``)
check each input against the example they came from and raise one ValueError naming the expected shape
(a compiled package given a wrong width read out of bounds, a 2-D input crashed the process); the C++
example exits with status 2 and one ``error:`` line, no C++ frames. docs/failures.md lists every row.
"""
from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List

import pytest
import torch

from sru import SRU
from sru.deploy import compile_package, export, load_package, onnx_session
from tests.test_deploy_export import ROOT, build_cpp_example

WIDTH = 16


@dataclass
class Row:
    id: str
    call: Callable[[Any], Any]  # given the runner or the program's module
    message: str


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An SRU(16, 8, num_layers=2), its package and its exported program's module."""
    folder = tmp_path_factory.mktemp("deploy")
    model = SRU(WIDTH, 8, num_layers=2).eval()
    example = torch.randn(4, 2, WIDTH)
    package = compile_package(model, example, folder / "sru.pt2")
    return {"folder": folder, "model": model, "package": package, "runner": load_package(package),
            "module": export(model, example).module()}


def _input_rows(owner: str) -> List[Row]:
    shape = f"(length, batch, {WIDTH})"
    return [
        Row(f"{owner}-wrong-width", lambda run: run(torch.randn(3, 2, 100)),
            f"{owner} expected input of shape {shape}, got (3, 2, 100)"),
        Row(f"{owner}-2d-input", lambda run: run(torch.randn(3, WIDTH)),
            f"{owner} expected input of shape {shape}, got (3, 16)"),
        Row(f"{owner}-float64", lambda run: run(torch.randn(3, 2, WIDTH, dtype=torch.float64)),
            f"{owner} expected input of dtype torch.float32, got torch.float64; convert it with x.to(torch.float32)"),
        Row(f"{owner}-meta-device", lambda run: run(torch.empty(3, 2, WIDTH, device="meta")),
            f"{owner} expected input on cpu, got meta; move it with x.to('cpu')"),
        Row(f"{owner}-length-0", lambda run: run(torch.randn(0, 2, WIDTH)),
            f"{owner} expected input of shape {shape} with length and batch >= 1 (its dynamic shapes start at 1), "
            "got (0, 2, 16); skip an empty batch (eager returns empty outputs for it)"),
        Row(f"{owner}-not-a-tensor", lambda run: run([[0.0] * WIDTH]),
            f"{owner} expected a tensor of shape {shape}, got list"),
    ]


def _onnx_rows() -> List[Row]:
    """ONNX Runtime's ``run`` takes numpy arrays by input name; sru.deploy.onnx_session checks ``x``."""
    import numpy as np

    shape, owner = f"(length, batch, {WIDTH})", "ONNX session"
    empty = (f"{owner} expected input of shape {shape} with length and batch >= 1 (ONNX Runtime's Scan fails "
             "on length 0 and its Reshape on batch 0), got {got}; skip an empty batch (eager returns empty "
             "outputs for it)")
    run = (lambda x: lambda session: session.run(None, {"x": x}))
    return [
        Row("onnx-length-0", run(np.zeros((0, 2, WIDTH), np.float32)), empty.format(got=(0, 2, WIDTH))),
        Row("onnx-batch-0", run(np.zeros((3, 0, WIDTH), np.float32)), empty.format(got=(3, 0, WIDTH))),
        Row("onnx-wrong-width", run(np.zeros((3, 2, 100), np.float32)),
            f"{owner} expected input of shape {shape}, got (3, 2, 100)"),
        Row("onnx-2d-input", run(np.zeros((3, WIDTH), np.float32)),
            f"{owner} expected input of shape {shape}, got (3, 16)"),
        Row("onnx-float64", run(np.zeros((3, 2, WIDTH))),
            f"{owner} expected input of dtype float32, got float64; convert it with x.astype(numpy.float32)"),
        Row("onnx-torch-tensor", run(torch.zeros(3, 2, WIDTH)),
            f"{owner} expected a numpy array of shape {shape}, got Tensor; pass x.numpy()"),
        Row("onnx-wrong-name", lambda session: session.run(None, {"input": np.zeros((3, 2, WIDTH), np.float32)}),
            f"{owner} expected an input named 'x', got ['input']"),
    ]


ONNX_ROWS = _onnx_rows()
PACKAGE_ROWS = _input_rows("sru package")
PROGRAM_ROWS = _input_rows("exported program")
EXPORT_ROWS = [
    Row("export-2d-example", lambda model: export(model, torch.randn(4, WIDTH)),
        "sru.deploy.export: expected an example input of shape (length, batch, input_size), got (4, 16)"),
    Row("export-empty-example", lambda model: export(model, torch.randn(0, 2, WIDTH)),
        "sru.deploy.export: the example expected input of shape (length, batch, 16) with length and batch >= 1 "
        "(its dynamic shapes start at 1), got (0, 2, 16); skip an empty batch (eager returns empty outputs for "
        "it)"),
    Row("load-package-missing-file", lambda model: load_package("nowhere/sru.pt2"),
        "sru.deploy.load_package: no package file at nowhere/sru.pt2; make one with "
        "sru.deploy.compile_package (docs/deploy.md)"),
    Row("export-not-a-module", lambda model: export("model.pt", torch.randn(4, 2, WIDTH)),
        "sru.deploy.export expected an nn.Module (an SRU, SRUpp or a model holding one), got str"),
    Row("export-training-mode", lambda model: export(copy.deepcopy(model).train(), torch.randn(4, 2, WIDTH)),
        "sru.deploy.export: the model is in training mode (its dropout would be part of the program); call "
        "model.eval() first: an exported program is for inference (docs/deploy.md)"),
    Row("export-example-of-another-width", lambda model: export(model, torch.randn(4, 2, 5)),
        "sru.deploy.export: the example has width 5, and the model takes input_size=16; give an example of shape "
        "(length, batch, 16)"),  # was the model's own check with symbolic sizes: got (s31, s81, 5)
    Row("static-program-other-length",
        lambda model: export(model, torch.randn(4, 2, WIDTH), dynamic=False).module()(torch.randn(5, 2, WIDTH)),
        "exported program expected input of shape (4, 2, 16) (exported with dynamic=False: these sizes only), got "
        "(5, 2, 16); export with dynamic=True for other lengths and batches"),  # was torch's "Guard failed"
    Row("onnx-session-missing-file", lambda model: onnx_session("nowhere/sru.onnx"),
        "sru.deploy.onnx_session: no ONNX file at nowhere/sru.onnx; make one with "
        "torch.onnx.export(model, (x,), path, dynamo=True) (docs/deploy.md#onnx)"),
]
# The C++ example: its arguments after the program's path, and its one stderr line.
CPP_ROWS = [
    ("cpp-missing-package", ["{folder}/none.pt2", "{library}", "7", "3"],
     "error: cannot read the package {folder}/none.pt2; make one with sru.deploy.compile_package (docs/deploy.md)"),
    ("cpp-length-not-a-number", ["{package}", "{library}", "abc", "3"],
     "error: length: expected a whole number from 1 to 65536, got 'abc'"),
    ("cpp-negative-batch", ["{package}", "{library}", "7", "-3"],
     "error: batch: expected a whole number from 1 to 16384, got '-3'"),
    ("cpp-length-zero", ["{package}", "{library}", "0", "3"],
     "error: length: expected a whole number from 1 to 65536, got '0'"),
]


@pytest.mark.slow
@pytest.mark.parametrize("row", PACKAGE_ROWS, ids=[r.id for r in PACKAGE_ROWS])
def test_package_refuses_bad_input_in_one_line(row, built):
    with pytest.raises(ValueError) as err:
        row.call(built["runner"])
    assert str(err.value) == row.message


@pytest.mark.slow
@pytest.mark.parametrize("row", PROGRAM_ROWS, ids=[r.id for r in PROGRAM_ROWS])
def test_exported_program_refuses_bad_input_in_one_line(row, built):
    with pytest.raises(ValueError) as err:
        row.call(built["module"])
    assert str(err.value) == row.message


@pytest.fixture(scope="module")
def onnx_file(built):
    """The same SRU exported with torch.onnx.export (dynamic length and batch)."""
    for name in ("onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(name, reason="the export extra is not installed: pip install '.[export]'")
    path = built["folder"] / "sru.onnx"
    length, batch = torch.export.Dim("length"), torch.export.Dim("batch")
    torch.onnx.export(built["model"], (torch.randn(4, 2, WIDTH),), str(path), dynamo=True, input_names=["x"],
                      output_names=["h", "c"], dynamic_shapes=({0: length, 1: batch},))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("row", ONNX_ROWS, ids=[r.id for r in ONNX_ROWS])
def test_onnx_session_refuses_bad_input_in_one_line(row, onnx_file):
    """ONNX Runtime itself fails inside its Scan node on length 0 and in a Reshape on batch 0."""
    with pytest.raises(ValueError) as err:
        row.call(onnx_session(onnx_file))
    assert str(err.value) == row.message


@pytest.mark.slow
def test_onnx_session_runs_good_input_as_eager(built, onnx_file):
    session = onnx_session(onnx_file)
    x = torch.randn(5, 3, WIDTH)
    h, c = session.run(None, {"x": x.numpy()})
    with torch.no_grad():
        h_ref, c_ref = built["model"](x)
    torch.testing.assert_close(torch.from_numpy(h), h_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.from_numpy(c), c_ref, atol=1e-5, rtol=1e-5)
    assert [o.name for o in session.get_outputs()] == ["h", "c"]  # the rest is the session's


@pytest.mark.slow
@pytest.mark.parametrize("row", EXPORT_ROWS, ids=[r.id for r in EXPORT_ROWS])
def test_export_refuses_a_bad_example_in_one_line(row, built):
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        row.call(built["model"])
    assert str(err.value) == row.message


@pytest.mark.slow
def test_good_input_still_runs_and_batch_1_length_1_examples_export(built):
    x = torch.randn(5, 3, WIDTH)
    with torch.no_grad():
        expected = built["model"](x)
        for got in (built["runner"](x), built["module"](x)):
            torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-5)
        for example in (torch.randn(1, 2, WIDTH), torch.randn(4, 1, WIDTH), torch.randn(1, 1, WIDTH)):
            module = export(built["model"], example).module()  # torch.export alone refused these
            torch.testing.assert_close(module(x)[0], expected[0], atol=1e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
@pytest.mark.parametrize("row", CPP_ROWS, ids=[r[0] for r in CPP_ROWS])
def test_cpp_example_refuses_bad_arguments_in_one_line(row, built, cpp_binary):
    _, argv, message = row
    names = {"folder": built["folder"], "package": built["package"], "library": cpp_binary[1]}
    run = subprocess.run([str(cpp_binary[0]), *(a.format(**names) for a in argv)], capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [message.format(**names)]


# a file of another kind given as a package or an ONNX model: (loader, the line after "<dir>/not_a_model")
OTHER_FILES = [
    ("load-package-not-a-package", load_package,
     "sru.deploy.load_package: <dir>/not_a_model is not an AOTInductor package (Failed to initialize zip archive: "
     "failed finding central directory); make one with sru.deploy.compile_package (docs/deploy.md)"),
    ("onnx-session-not-an-onnx-file", onnx_session,
     "sru.deploy.onnx_session: <dir>/not_a_model could not be loaded as an ONNX model ([ONNXRuntimeError] : 7 : "
     "INVALID_PROTOBUF : Load model from <dir>/not_a_model failed:Protobuf parsing failed.); make one with "
     "torch.onnx.export(model, (x,), path, dynamo=True) (docs/deploy.md#onnx)"),
]


@pytest.mark.slow
@pytest.mark.parametrize("row", OTHER_FILES, ids=[r[0] for r in OTHER_FILES])
def test_a_file_of_another_kind_is_named_in_one_line(row, tmp_path):
    """Were torch's 'Failed to initialize zip archive' RuntimeError and onnxruntime's InvalidProtobuf."""
    name, load, message = row
    if name.startswith("onnx"):
        pytest.importorskip("onnxruntime", reason="the export extra is not installed: pip install '.[export]'")
    (tmp_path / "not_a_model").write_bytes(b"RIFF....WAVEfmt " + bytes(64))
    with pytest.raises(ValueError) as err:
        load(tmp_path / "not_a_model")
    assert str(err.value) == message.replace("<dir>", str(tmp_path))


@pytest.fixture(scope="module")
def cpp_binary(built):
    library = subprocess.run([sys.executable, "-m", "sru.deploy", "op-library"], cwd=ROOT, check=True,
                             capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT))).stdout.strip()
    return build_cpp_example(built["folder"]), library


def test_docs_failures_lists_every_row():
    docs = (Path(__file__).parents[1] / "docs" / "failures.md").read_text()
    messages = {r.id: r.message for r in PACKAGE_ROWS + PROGRAM_ROWS + EXPORT_ROWS + ONNX_ROWS}
    messages.update({r[0]: r[2].format(folder="<dir>") for r in CPP_ROWS})
    messages.update({r[0]: r[2] for r in OTHER_FILES})
    missing = [name for name, message in messages.items() if message not in docs]
    assert not missing, f"add these rows to docs/failures.md: {missing}"
