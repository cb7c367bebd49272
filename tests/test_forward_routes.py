"""The forward routes (docs/ops.md#forward-routes, sru/forward_routes.py): the table in the docs is the
``Route`` enum, each route is the one chosen where the table says it applies, and it computes what the
general route computes (the general route is the one a ``backend="reference"`` copy always takes)."""
import copy
import re
from pathlib import Path

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from sru import SRU, SRUCell, forward_routes
from sru.forward_routes import Route, choose_route
from sru.ops import available_backends

ROOT = Path(__file__).resolve().parents[1]
needs_cpu_kernel = pytest.mark.skipif("cpu" not in available_backends(), reason="CPU kernel not built")


def documented_routes():
    text = (ROOT / "docs" / "ops.md").read_text()
    section = text.split("## Forward routes", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([a-z ]+)` \|", section, re.M)]


def test_the_documented_table_is_the_enum_in_order():
    assert documented_routes() == [route.value for route in Route]


def general_copy(module):
    """The same weights, always on the general route (the reference backend has no other)."""
    twin = copy.deepcopy(module)
    twin.backend = "reference"
    return twin


def stack(**options):
    torch.manual_seed(0)
    return SRU(6, 6, num_layers=2, **options).double()


@needs_cpu_kernel
@pytest.mark.parametrize("options, route", [
    (dict(), Route.STACK),                                   # plain: one C call
    (dict(layer_norm=True), Route.INFERENCE),                # not plain: a kernel call per layer
    (dict(projection_size=3, bidirectional=True), Route.INFERENCE),
    (dict(proj_input_to_hidden_first=True, bidirectional=True), Route.INFERENCE),
])
def test_inference_routes_equal_the_general_route(options, route):
    model = stack(**options).eval()
    x = torch.randn(5, 3, 6, dtype=torch.float64)
    mask = torch.zeros(5, 3, dtype=torch.bool)
    mask[3:, 1] = True
    with torch.no_grad():
        assert choose_route(model, x, None, mask)[0] is route
        assert choose_route(general_copy(model), x, None, mask)[0] is Route.GENERAL
        got, want = model(x, mask_pad=mask), general_copy(model)(x, mask_pad=mask)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@needs_cpu_kernel
def test_a_lone_cell_in_inference_takes_the_inference_route():
    torch.manual_seed(0)
    cell = SRUCell(6, 6, bidirectional=True).double().eval()
    x = torch.randn(4, 2, 6, dtype=torch.float64)
    with torch.no_grad():
        assert choose_route(cell, x)[0] is Route.INFERENCE
        for a, b in zip(cell(x), general_copy(cell)(x)):
            torch.testing.assert_close(a, b)


@needs_cpu_kernel
def test_training_routes_per_layer_and_their_gradients():
    """k = 3 layers fuse; a layer with pre-layer-norm, rnn_dropout or another backend runs the general body."""
    model = stack(dropout=0.2).train()
    x = torch.randn(5, 3, 6, dtype=torch.float64, requires_grad=True)
    assert choose_route(model, x)[0] is Route.GENERAL  # autograd: layer by layer
    assert [choose_route(cell, x)[0] for cell in model.rnn_lst] == [Route.FUSED, Route.FUSED]
    for other in (SRUCell(6, 6, layer_norm=True), SRUCell(6, 6, rnn_dropout=0.1), SRUCell(6, 6, backend="reference"),
                  SRUCell(6, 6, n_proj=3), SRUCell(4, 6)):  # the last: k = 4
        assert choose_route(other.double(), x[..., :other.input_size])[0] is Route.GENERAL
    twin = general_copy(model)
    grads = []
    for module in (model, twin):
        torch.manual_seed(3)  # the same dropout masks
        h, c = module(x)
        grads.append(torch.autograd.grad((h * h).sum() + c.sum(), [x, *module.parameters()]))
        grads[-1] = (h, c, *grads[-1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_packed_input_takes_the_packed_route_with_the_same_body():
    model = stack(layer_norm=True, bidirectional=False)
    x = torch.randn(5, 3, 6, dtype=torch.float64)
    lengths = torch.tensor([5, 2, 4])
    packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
    assert choose_route(model, packed)[0] is Route.PACKED
    h_packed, c_packed = model(packed)
    mask = torch.arange(5)[:, None] >= lengths[None, :]
    h, c = model(x, mask_pad=mask)
    torch.testing.assert_close(pad_packed_sequence(h_packed)[0], h.masked_fill(mask[..., None], 0))
    torch.testing.assert_close(c_packed, c)


def test_export_tracing_takes_the_export_route(monkeypatch):
    """While torch.export traces, every layer runs the general body with the export form of the recurrence."""
    seen = []

    def spy(*args, **kwargs):
        route = choose_route(*args, **kwargs)
        seen.append(route[0])
        return route
    monkeypatch.setattr("sru.modules.choose_route", spy)
    torch.manual_seed(0)
    model = SRU(4, 4, num_layers=1).eval()
    x = torch.randn(3, 2, 4)
    program = torch.export.export(model, (x,))
    assert Route.EXPORT in seen and Route.FUSED not in seen
    for a, b in zip(program.module()(x), model(x)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_the_fused_route_is_switched_off_in_one_place(monkeypatch):
    """choose_route asks its guards by name: replacing one changes the route everywhere it applies."""
    cell = SRUCell(6, 6).double()
    x = torch.randn(3, 2, 6, dtype=torch.float64, requires_grad=True)
    monkeypatch.setattr(forward_routes, "fuse_layer", lambda *args: False)
    assert choose_route(cell, x)[0] is Route.GENERAL
    assert type(cell(x)[0].grad_fn).__name__ != "_LinearRecurrenceBackward"
