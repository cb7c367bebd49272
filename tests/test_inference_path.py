"""The no-autograd CPU inference path (sru.ops.cpu.inference), half-precision modules, and
empty inputs.

The inference path must give exactly the general path's numbers (same matmul, same kernel)
and, decoding one step at a time with the state carried, the full-sequence result.
"""
import pytest
import torch

from sru import SRU, SRUCell
from sru.ops.cpu.paths import inference_plan
from sru.ops import available_backends
from sru_helpers import randomize, decode_step_by_step

needs_kernel = pytest.mark.skipif("cpu" not in available_backends(),
                                  reason="the fused CPU kernel does not build here")


def _general_path(module, *args, **kwargs):
    """The same forward with the inference path switched off (grad mode on, no leaf needs it)."""
    with torch.enable_grad():
        h, c = module(*args, **kwargs)
    return h.detach(), c.detach()


CONFIGS = {
    "plain": dict(),
    "k4 first layer": dict(input_size=6),
    "bidirectional": dict(hidden_size=4, bidirectional=True),
    "projection": dict(input_size=12, projection_size=4),
    "pre layer norm": dict(layer_norm=True),
    "post layer norm": dict(layer_norm=True, normalize_after=True),
    "no skip, tanh": dict(has_skip_term=False, use_tanh=True),
    "rescale, highway bias": dict(rescale=True, highway_bias=-1.0),
}


@needs_kernel
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inference_path_equals_the_general_path_exactly(name, mode):
    cfg = dict(input_size=8, hidden_size=8, num_layers=3, dropout=0.3, rnn_dropout=0.2)
    cfg.update(CONFIGS[name])
    rnn = randomize(SRU(**cfg)).eval()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, cfg["input_size"], generator=gen)
    c0 = torch.randn(3, 3, rnn.output_size, generator=gen)
    mask_pad = torch.zeros(5, 3, dtype=torch.bool)
    mask_pad[3:, 1] = True
    assert inference_plan(rnn.rnn_lst, x) is None  # grad mode: the general path
    context = torch.inference_mode() if mode == "inference_mode" else torch.no_grad()
    for kwargs in ({}, {"c0": c0}, {"c0": c0, "mask_pad": mask_pad}):
        expected = _general_path(rnn, x, **kwargs)
        with context:
            assert inference_plan(rnn.rnn_lst, x) is not None
            got = rnn(x, **kwargs)
        torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1], expected[1], rtol=0, atol=0)


@needs_kernel
@pytest.mark.parametrize("batch", [1, 4])
def test_decoding_step_by_step_equals_the_full_sequence(batch):
    rnn = randomize(SRU(16, 16, num_layers=2)).eval()
    x = torch.randn(7, batch, 16, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        (h_full, c_full), (h_steps, c) = decode_step_by_step(rnn, x)
    # One (B, d) row product vs rows of a (L*B, d) product: the BLAS may round differently.
    torch.testing.assert_close(h_steps, h_full, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(c, c_full, rtol=1e-6, atol=1e-6)


@needs_kernel
def test_cell_single_step_uses_the_inference_path():
    cell = randomize(SRUCell(8, 8)).eval()
    x, c0 = torch.randn(3, 8), torch.randn(3, 8)
    expected = _general_path(cell, x, c0)
    with torch.no_grad():
        h, c = cell(x, c0)
    assert h.shape == (3, 8) and c.shape == (3, 8)
    torch.testing.assert_close((h, c), expected, rtol=0, atol=0)


def test_training_with_dropout_keeps_the_general_path():
    rnn = SRU(8, 8, num_layers=2, dropout=0.5).train()
    with torch.no_grad():
        assert inference_plan(rnn.rnn_lst, torch.zeros(2, 1, 8)) is None  # masks to draw
        rnn.eval()
        assert inference_plan(rnn.rnn_lst, torch.zeros(2, 1, 8, dtype=torch.float64)) is None


# ---------------------------------------------------------------- half-precision modules

# bf16 has an 8-bit mantissa (relative rounding 2^-8 = 0.4%): after a few layers of products
# in bf16, outputs differ from float32 by about 1-2% of their scale.
HALF_TOLERANCE = dict(rtol=0.05, atol=0.05)


@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("grad", [False, True])
def test_bfloat16_module_runs_and_matches_float32(num_layers, grad):
    ref = randomize(SRU(8, 8, num_layers=num_layers, layer_norm=num_layers == 3), scale=0.3)
    half = randomize(SRU(8, 8, num_layers=num_layers, layer_norm=num_layers == 3),
                      scale=0.3).to(torch.bfloat16)
    x = torch.randn(6, 2, 8, generator=torch.Generator().manual_seed(3))
    c0 = torch.randn(num_layers, 2, 8, generator=torch.Generator().manual_seed(4))
    with torch.set_grad_enabled(grad):
        h, c = half(x.to(torch.bfloat16), c0.to(torch.bfloat16))
        h_ref, c_ref = ref(x, c0)
    assert h.dtype == torch.bfloat16  # outputs in the input's dtype
    assert c.dtype == torch.float32   # the state stays in the float32 it was accumulated in
    assert h.shape == h_ref.shape and c.shape == c_ref.shape
    torch.testing.assert_close(h.float(), h_ref.detach(), **HALF_TOLERANCE)
    torch.testing.assert_close(c, c_ref.detach(), **HALF_TOLERANCE)
    if grad:
        h.float().sum().backward()
        assert all(p.grad is not None and p.grad.dtype == torch.bfloat16
                   for p in half.parameters() if p.requires_grad)


def test_float16_cell_on_cpu_keeps_the_input_dtype():
    cell = SRUCell(8, 4, bidirectional=True).to(torch.float16)
    h, c = cell(torch.randn(3, 2, 8, dtype=torch.float16))
    assert h.dtype == torch.float16 and c.dtype == torch.float32 and h.shape == (3, 2, 8)


# ---------------------------------------------------------------- empty inputs

@pytest.mark.parametrize("length, batch", [(0, 3), (4, 0), (0, 0)])
@pytest.mark.parametrize("grad", [False, True])
def test_empty_input_gives_empty_outputs(length, batch, grad):
    rnn = SRU(8, 4, num_layers=2, bidirectional=True)
    with torch.set_grad_enabled(grad):
        h, c = rnn(torch.randn(length, batch, 8))
        assert h.shape == (length, batch, 8) and c.shape == (2, batch, 8)
        assert not c.any()
        c0 = torch.randn(2, batch, 8)
        h, c = rnn(torch.randn(length, batch, 8), c0)
    assert torch.equal(c, c0 if length == 0 else torch.zeros_like(c0))  # no step changed c
    cell = SRUCell(8, 8)
    h, c = cell(torch.randn(length, batch, 8))
    assert h.shape == (length, batch, 8) and c.shape == (batch, 8)
