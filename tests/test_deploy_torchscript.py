"""torch.jit.script and torch.jit.trace of SRU / SRUCell (docs/deploy.md#torchscript).

The scripted forward is sru/scripting/cells.py; these tests check it against eager over the official
2.x scripting matrix (bidirectional x rescale x projection x layer_norm, as the official test
suite), the other options it supports, and a save / load round trip in a fresh process.
"""
import itertools
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from sru import SRU, SRUCell
from tests.sru_helpers import randomize

MATRIX = list(itertools.product([False, True], [False, True], [0, 3], [False, True]))


def _inputs(batch=3, length=5, width=6, seed=1):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(length, batch, width, generator=gen)
    c0 = torch.randn(2, batch, 8, generator=gen)
    mask = torch.zeros(length, batch, dtype=torch.bool)
    mask[3:, 1] = True  # sequence 1 is 3 long
    return x, c0, mask


def _assert_equal_outputs(eager, scripted, *args, atol=1e-5):
    with torch.no_grad():
        expected, got = eager(*args), scripted(*args)
    for e, g in zip(expected, got):
        assert e.shape == g.shape
        torch.testing.assert_close(g, e, atol=atol, rtol=1e-5)


@pytest.mark.parametrize("bidirectional,rescale,projection,layer_norm", MATRIX)
def test_scripted_sru_equals_eager_over_the_official_matrix(bidirectional, rescale, projection,
                                                            layer_norm):
    hidden = 4 if bidirectional else 8
    model = randomize(SRU(6, hidden, num_layers=2, bidirectional=bidirectional, rescale=rescale,
                           projection_size=projection, layer_norm=layer_norm)).eval()
    scripted = torch.jit.script(model)
    x, c0, mask = _inputs()
    _assert_equal_outputs(model, scripted, x)
    _assert_equal_outputs(model, scripted, x, c0, mask)


@pytest.mark.parametrize("options", [
    dict(normalize_after=True, layer_norm=True),
    dict(num_layers=3, dropout=0.3, rnn_dropout=0.2),  # dropouts: eval mode draws no mask
    dict(use_tanh=True, has_skip_term=False),
    dict(batch_first=True, nn_rnn_compatible_return=True),
    dict(proj_input_to_hidden_first=True),
    dict(highway_bias=-1.0, rescale=True, v1=True),
])
def test_scripted_sru_equals_eager_with_other_options(options):
    options = dict(dict(num_layers=2, bidirectional=True), **options)
    model = randomize(SRU(6, 4, **options)).eval()
    scripted = torch.jit.script(model)
    x, _, mask = _inputs()
    c0 = torch.randn(options["num_layers"], 3, 8)
    if options.get("batch_first"):
        x, mask = x.transpose(0, 1), mask.t()
    _assert_equal_outputs(model, scripted, x)
    _assert_equal_outputs(model, scripted, x, c0, mask)


@pytest.mark.parametrize("bidirectional,rescale,projection,layer_norm", MATRIX[::3])
def test_scripted_cell_equals_eager(bidirectional, rescale, projection, layer_norm):
    cell = randomize(SRUCell(6, 4, bidirectional=bidirectional, rescale=rescale,
                              n_proj=projection, layer_norm=layer_norm)).eval()
    scripted = torch.jit.script(cell)
    x, _, mask = _inputs()
    c0 = torch.randn(3, cell.output_size)
    _assert_equal_outputs(cell, scripted, x)
    _assert_equal_outputs(cell, scripted, x, c0, mask)
    _assert_equal_outputs(cell, scripted, x[0], c0)  # a single (B, d) step


def test_scripted_model_trains_with_the_same_gradients():
    """In training mode (no dropout: masks are random) the scripted module is differentiable
    and gives eager's gradients."""
    model = randomize(SRU(6, 4, num_layers=2, bidirectional=True, layer_norm=True))
    scripted = torch.jit.script(model)
    x, c0, mask = _inputs()
    grads = []
    for module in (model, scripted):
        model.zero_grad()
        h, c = module(x, c0, mask)
        (h.square().sum() + c.sum()).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for eager, script in zip(*grads):
        torch.testing.assert_close(script, eager, atol=1e-5, rtol=1e-5)


def test_scripted_model_draws_dropout_masks_in_training_mode():
    model = SRU(6, 4, num_layers=2, dropout=0.5, rnn_dropout=0.5).train()
    scripted = torch.jit.script(model)
    x = torch.randn(5, 3, 6)
    assert not torch.equal(scripted(x)[0], scripted(x)[0])
    scripted.eval()
    assert torch.equal(scripted(x)[0], scripted(x)[0])


def test_scripted_model_rejects_packed_input_and_custom_m_in_one_line():
    scripted = torch.jit.script(SRU(6, 4))
    with pytest.raises(Exception, match="SRU expected input of shape"):
        scripted(torch.randn(5, 3, 7))
    cell = SRUCell(6, 6, custom_m=torch.nn.Linear(6, 18))
    with pytest.raises(ValueError, match=r"^SRUCell with custom_m cannot be scripted \(torch.jit.script\)"):
        torch.jit.script(cell)  # refused when scripting, not at the first call
    with pytest.raises(ValueError, match="SRUCell with custom_m cannot be scripted"):
        torch.jit.script(SRU(6, 6, custom_m=torch.nn.Linear(6, 18)))


def test_trace_prints_no_tracer_warnings_from_the_layer():
    """The layer's shape checks compare traced sizes: each printed a TracerWarning (about 20 per
    trace) that names nothing to act on; a trace records fixed shapes anyway."""
    with warnings.catch_warnings(record=True) as caught:
        torch.jit.trace(SRU(6, 4, num_layers=2, bidirectional=True).eval(), (torch.randn(5, 3, 6),))
        torch.jit.trace(SRUCell(6, 4).eval(), (torch.randn(5, 3, 6),))
    assert [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)] == []


def test_eager_checks_and_messages_are_unchanged():
    with pytest.raises(ValueError, match=r"SRU expected input of shape \(length, batch, 6\)"):
        SRU(6, 4)(torch.randn(5, 3, 7))


@pytest.mark.slow
def test_scripted_model_survives_save_and_load_in_a_fresh_process(tmp_path):
    """jit.save here, jit.load in a new interpreter that never imports sru: the saved module
    carries its own code."""
    model = randomize(SRU(6, 4, num_layers=2, bidirectional=True, layer_norm=True,
                           projection_size=3, rescale=True)).eval()
    x, c0, mask = _inputs()
    path = tmp_path / "sru_scripted.pt"
    torch.jit.save(torch.jit.script(model), str(path))
    torch.save({"x": x, "c0": c0, "mask": mask}, tmp_path / "inputs.pt")
    script = textwrap.dedent(f"""
        import sys, torch
        m = torch.jit.load({str(path)!r})
        i = torch.load({str(tmp_path / "inputs.pt")!r})
        with torch.no_grad():
            h, c = m(i["x"], i["c0"], i["mask"])
        torch.save({{"h": h, "c": c}}, {str(tmp_path / "out.pt")!r})
        assert "sru" not in sys.modules
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)
    out = torch.load(tmp_path / "out.pt")
    with torch.no_grad():
        h, c = model(x, c0, mask)
    torch.testing.assert_close(out["h"], h, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["c"], c, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_trace_passes_its_own_check(training):
    """torch.jit.trace re-runs the traced graph and compares (check_trace=True, the default):
    the direct ctypes kernel calls are invisible to the tracer and used to leave an empty
    buffer in the graph (sru/ops/cpu/paths.py ``_eager_cpu``)."""
    model = randomize(SRU(6, 4, num_layers=2, bidirectional=True)).train(training)
    x, c0, mask = _inputs()
    traced = torch.jit.trace(model, (x, c0, mask))  # raises TracingCheckError on a mismatch
    x2, c2, _ = _inputs(seed=7)
    _assert_equal_outputs(model, traced, x2, c2, mask)
