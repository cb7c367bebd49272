"""Export (sru/ops/export.py): the scan form of the recurrence equals the reference, and
``torch.onnx.export`` of a stacked SRU runs in ONNX Runtime with PyTorch's outputs (dynamic
length and batch, mask_pad, a one-step decoder with carried state).

The ONNX tests need the ``export`` extra (``pip install ".[export]"``: onnx, onnxscript,
onnxruntime) and are skipped without it; each export traces for several seconds (slow tier).
"""
import pytest
import torch

import sru
from sru import testing
from sru.ops.export import elementwise_recurrence_scan


@pytest.mark.slow  # the eager scan compiles its body: seconds per case
@pytest.mark.parametrize("case", ["L1-B1-d1", "padded-bi-k4-dropout-tanh", "no-skip", "per-step-weights",
                                  "scale-x-bi-padded"])
def test_scan_form_equals_reference(case):
    """Eager float64, forward and gradients (the scan is differentiable too); the shared cases
    of sru/testing.py."""
    inputs, options = testing.case_inputs(case, dtype=torch.float64)
    errors = testing.compare_with_reference(elementwise_recurrence_scan, inputs, **options)
    assert max(errors.values()) < 1e-10, errors


class _Stack(torch.nn.Module):
    """SRU with positional inputs, the way an exported graph takes them."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, mask_pad, c0):
        return self.rnn(x, c0, mask_pad=mask_pad)


def _export(module, args, path, dynamic_shapes, names):
    module.eval()  # the wrapper too (its SRU is already in eval mode): inference graphs, no export warning
    return torch.onnx.export(module, args, str(path), dynamo=True, input_names=names,
                             output_names=["h", "c"], dynamic_shapes=dynamic_shapes)


def _ort():
    pytest.importorskip("onnx", reason="the export extra is not installed: pip install '.[export]'")
    pytest.importorskip("onnxscript", reason="the export extra is not installed")
    return pytest.importorskip("onnxruntime", reason="the export extra is not installed")


@pytest.mark.slow
@pytest.mark.parametrize("bidirectional", [True, False])
def test_onnx_export_dynamic_shapes_matches_pytorch(tmp_path, bidirectional):
    """A 2-layer stack exported once runs on two different (L, B) with padding and c0."""
    ort = _ort()
    torch.manual_seed(0)
    rnn = sru.SRU(12, 8, num_layers=2, bidirectional=bidirectional, rescale=True).eval()
    model = _Stack(rnn)
    L, B = torch.export.Dim("length"), torch.export.Dim("batch")
    example = (torch.randn(6, 3, 12), torch.zeros(6, 3, dtype=torch.bool),
               torch.zeros(2, 3, rnn.output_size))
    _export(model, example, tmp_path / "sru.onnx",
            {"x": {0: L, 1: B}, "mask_pad": {0: L, 1: B}, "c0": {1: B}}, ["x", "mask_pad", "c0"])
    session = ort.InferenceSession(str(tmp_path / "sru.onnx"), providers=["CPUExecutionProvider"])
    for length, batch in ((9, 5), (4, 2)):
        lengths = torch.randint(1, length + 1, (batch,))
        lengths[0] = length
        mask_pad = torch.arange(length).unsqueeze(1) >= lengths.unsqueeze(0)
        x, c0 = torch.randn(length, batch, 12), torch.randn(2, batch, rnn.output_size)
        h, c = session.run(None, {"x": x.numpy(), "mask_pad": mask_pad.numpy(), "c0": c0.numpy()})
        with torch.no_grad():
            h_ref, c_ref = model(x, mask_pad, c0)
        torch.testing.assert_close(torch.from_numpy(h), h_ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(torch.from_numpy(c), c_ref, rtol=1e-5, atol=1e-5)


class _Step(torch.nn.Module):
    """One decoding step: x (1, B, d) and the carried state c (layers, B, dirs*d)."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, c):
        return self.rnn(x, c)


@pytest.mark.slow
def test_onnx_one_step_decoder_carries_state(tmp_path):
    """The exported L = 1 step, fed its own state back, equals PyTorch on the whole sequence."""
    ort = _ort()
    torch.manual_seed(1)
    rnn = sru.SRU(10, 10, num_layers=2, use_tanh=True).eval()
    B = torch.export.Dim("batch")
    _export(_Step(rnn), (torch.randn(1, 2, 10), torch.zeros(2, 2, 10)), tmp_path / "step.onnx",
            {"x": {1: B}, "c": {1: B}}, ["x", "c0"])
    session = ort.InferenceSession(str(tmp_path / "step.onnx"), providers=["CPUExecutionProvider"])
    x = torch.randn(7, 3, 10)
    with torch.no_grad():
        h_ref, c_ref = rnn(x)
    c = torch.zeros(2, 3, 10).numpy()
    for t in range(7):
        h, c = session.run(None, {"x": x[t:t + 1].numpy(), "c0": c})
        torch.testing.assert_close(torch.from_numpy(h), h_ref[t:t + 1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(c), c_ref, rtol=1e-5, atol=1e-5)


class _Head(torch.nn.Module):
    """An SRU and a linear head, as the tasks' models: both quantised by quantize_dynamic."""

    def __init__(self):
        super().__init__()
        self.rnn, self.head = sru.SRU(16, 8, num_layers=2, bidirectional=True), torch.nn.Linear(16, 5)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


@pytest.mark.slow
def test_onnx_export_of_a_quantized_model_with_static_shapes(tmp_path):
    """A quantize_dynamic model, exported without dynamic_shapes (its size-1 scan inputs failed to
    broadcast there), runs in ONNX Runtime with the model's outputs (int8 weights go out dequantised)."""
    ort = _ort()
    torch.manual_seed(2)
    model = sru.quantize_dynamic(_Head().eval())
    x = torch.randn(6, 3, 16)
    torch.onnx.export(model, (x,), str(tmp_path / "q.onnx"), dynamo=True, input_names=["x"])
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(session.run(None, {"x": x.numpy()})[0]), model(x),
                                   rtol=1e-5, atol=1e-5)
