"""torch.jit.script of SRUpp (sru/scripting/srupp.py, sru/scripting/attention.py): the official
3.0 SRU++ is scriptable (its test_ts_srupp.py scripts SRUpp(D, D, D, num_layers=2)); the scripted
stack equals eager over its options, masks, attention memory and the saved inputs."""
import pytest
import torch

from sru import SRUpp
from tests.sru_helpers import randomize


def _inputs(length=5, batch=3, width=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(length, batch, width, generator=gen)
    mask = torch.zeros(length, batch, dtype=torch.bool)
    mask[3:, 1] = True
    return x, mask


def _assert_same(expected, got):
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], expected[1], atol=1e-5, rtol=1e-5)
    for e, g in zip(expected[2]["saved_inputs"], got[2]["saved_inputs"]):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("options", [
    dict(),
    dict(num_heads=2, bidirectional=True, layer_norm=True),
    dict(normalize_after=True, layer_norm=True, rescale=True, attn_layer_norm=False),
    dict(num_layers=3, attention_every_n_layers=2),  # layers without attention
    dict(proj_input_to_hidden_first=True, nn_rnn_compatible_return=True, bidirectional=True),
])
def test_scripted_srupp_equals_eager(options):
    options = dict(dict(num_layers=2), **options)
    model = randomize(SRUpp(8, 8, 4, **options), scale=0.3).eval()
    scripted = torch.jit.script(model)
    x, mask = _inputs()
    layers, width = options["num_layers"], model.output_size
    c0 = torch.randn(layers, 3, width)
    causal = torch.full((5, 5), float("-inf")).triu(1)
    with torch.no_grad():
        _assert_same(model(x), scripted(x))
        _assert_same(model(x, c0, mask, attn_mask=causal), scripted(x, c0, mask, attn_mask=causal))


def test_scripted_srupp_attends_over_memory():
    model = randomize(SRUpp(8, 8, 4, num_layers=2, num_heads=2), scale=0.3).eval()
    scripted = torch.jit.script(model)
    x, mask = _inputs()
    with torch.no_grad():
        first = model(x)
        memory = first[2]["saved_inputs"]
        memory_mask = torch.zeros(5, 3, dtype=torch.bool)
        memory_mask[:2, 2] = True
        _assert_same(model(x, mask_pad=mask, memory=memory, memory_mask_pad=memory_mask),
                     scripted(x, mask_pad=mask, memory=memory, memory_mask_pad=memory_mask))


def test_scripted_srupp_trains_with_eager_gradients():
    model = randomize(SRUpp(8, 8, 4, num_layers=2, layer_norm=True), scale=0.3)
    scripted = torch.jit.script(model)
    x, mask = _inputs()
    grads = []
    for module in (model, scripted):
        model.zero_grad()
        h, c, _ = module(x, mask_pad=mask)
        (h.square().sum() + c.sum()).backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    for eager, script in zip(*grads):
        torch.testing.assert_close(script, eager, atol=1e-5, rtol=1e-5)


def test_official_ts_srupp_example_scripts_and_saves(tmp_path):
    """The official test_ts_srupp.py: SRUpp(D, D, D, num_layers=2), scripted and saved."""
    model = SRUpp(4, 4, 4, num_layers=2).eval()
    path = tmp_path / "srupp_ts.pt"
    torch.jit.script(model).save(str(path))
    loaded = torch.jit.load(str(path))
    x = torch.ones(3, 2, 4)
    with torch.no_grad():
        _assert_same(model(x), loaded(x))
