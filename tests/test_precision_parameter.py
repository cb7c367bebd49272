"""bf16 reaches the layer as a parameter (issue 67): ``sru.to_precision(model, "bf16")`` sets
``Precision.BF16`` on every SRU layer and Linear, each product carries it to the route table
(sru/ops/cpu/routes.py), and no autocast is around the model; the commands' ``precision=bf16`` goes that way."""
import copy
import io
import pickle

import pytest
import torch
from torch import nn

import sru
from sru import Precision
from sru.linear import DispatchedLinear
from sru.ops.cpu import routes
from tasks.engine.inference.precision import apply_precision


class _Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.out = sru.SRU(32, 32, num_layers=2), nn.Linear(32, 7)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


@pytest.fixture
def calls(monkeypatch):
    """The ``routes.Call`` of every product, as the route table sees it (the real routes still run)."""
    seen = []
    real = routes.route

    def record(x, weight, call, linear=False):
        seen.append(call)
        return real(x, weight, call, linear)
    monkeypatch.setattr(routes, "route", record)
    return seen


@pytest.mark.parametrize("length,batch", [(1, 1), (17, 3)])  # a decoding step (the stack path's shape) and more
def test_bf16_as_a_parameter_reaches_every_product_and_equals_autocast(calls, length, batch):
    torch.manual_seed(0)
    model = _Head().eval()
    x = torch.randn(length, batch, 32)
    with torch.no_grad():
        fp32 = model(x)
        with torch.autocast("cpu", torch.bfloat16):
            autocast = model(x).float()
        calls.clear()
        converted = sru.to_precision(model, "bf16")
        got = converted(x)
    assert not torch.is_autocast_enabled("cpu")
    assert calls and all(call.precision is Precision.BF16 for call in calls)  # 2 layers and the head
    assert len(calls) == 3
    assert torch.equal(got, autocast) and not torch.equal(got, fp32)
    assert isinstance(converted.out, DispatchedLinear) and converted.out.precision is Precision.BF16
    assert [cell.precision for cell in converted.rnn.rnn_lst] == [Precision.BF16] * 2
    assert model.rnn.rnn_lst[0].precision is Precision.FP32 and type(model.out) is nn.Linear  # a copy


def test_bf16_training_with_the_parameter_keeps_a_float32_recurrence():
    torch.manual_seed(0)
    model = sru.to_precision(sru.SRU(32, 32, num_layers=2), Precision.BF16)
    x = torch.randn(9, 4, 32, requires_grad=True)
    h, c = model(x)
    h.sum().backward()
    assert h.dtype is torch.float32 and c.dtype is torch.float32
    assert model.rnn_lst[0].weight.grad.dtype is torch.float32 and torch.isfinite(x.grad).all()


def test_the_precision_survives_copies_pickles_and_scripting():
    model = sru.to_precision(sru.SRU(16, 16, num_layers=1), "bf16").eval()
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    for other in (copy.deepcopy(model), pickle.loads(pickle.dumps(model)), torch.load(buffer, weights_only=False)):
        assert other.rnn_lst[0].precision is Precision.BF16
    scripted = torch.jit.script(model)
    x = torch.randn(3, 2, 16)
    assert scripted(x)[0].shape == (3, 2, 16)
    assert sru.to_precision(model, "fp32").rnn_lst[0].precision is Precision.FP32


def test_int8_through_to_precision_is_quantize_dynamic():  # its refusals: tests/test_bad_inputs_layer.py
    assert sru.to_precision(sru.SRUCell(8, 8), "int8").precision is Precision.INT8


def test_the_commands_convert_the_model_instead_of_entering_autocast():
    model = _Head().eval()
    cpu = torch.device("cpu")
    converted, autocast = apply_precision(model, Precision.BF16, cpu)
    assert autocast is Precision.FP32 and converted is not model
    assert converted.rnn.rnn_lst[1].precision is Precision.BF16 and converted.out.precision is Precision.BF16
    same, autocast = apply_precision(model, None, cpu, run_precision="bf16")  # the run's own trainer.precision
    assert autocast is Precision.FP32 and same.out.precision is Precision.BF16
    unchanged, autocast = apply_precision(model, Precision.FP32, cpu)
    assert unchanged is model and autocast is Precision.FP32
