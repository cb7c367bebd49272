"""SRU / SRUCell module semantics: shapes, init constants, dropout, padding, state, layer norm."""
import math

import pytest
import torch
from torch import nn

from sru import SRU, SRUCell
from sru_helpers import BACKENDS, randomize


# ---------------------------------------------------------------- parameters and init

@pytest.mark.parametrize("d_in, d, bidirectional, skip, k", [
    (8, 8, False, True, 3),      # input can be added to h directly
    (6, 8, False, True, 4),      # needs the skip projection u3
    (8, 4, True, True, 3),       # 2 directions x 4 = 8 = input size
    (6, 8, False, False, 3),     # no skip term, no u3
])
def test_weight_shapes_k3_vs_k4(d_in, d, bidirectional, skip, k):
    cell = SRUCell(d_in, d, bidirectional=bidirectional, has_skip_term=skip)
    dirs = 2 if bidirectional else 1
    assert cell.num_matrices == k
    assert cell.weight.shape == (d_in, dirs * d * k)
    assert cell.weight_c.shape == cell.bias.shape == (2 * dirs * d,)
    assert cell.weight_proj is None


def test_projection_shapes_and_equivalence_to_the_product():
    cell = randomize(SRUCell(10, 8, n_proj=4)).double()
    assert cell.weight_proj.shape == (10, 4) and cell.weight.shape == (4, 32)
    plain = SRUCell(10, 8).double()
    plain.load_state_dict({**cell.state_dict(), "weight": cell.weight_proj @ cell.weight},
                          strict=False)
    x = torch.randn(5, 3, 10, dtype=torch.float64)
    torch.testing.assert_close(cell(x)[0], plain(x)[0])
    assert SRUCell(10, 8, n_proj=10).weight_proj is None  # a projection must shrink something


def test_init_recipe_constants():
    cell = SRUCell(8, 8, highway_bias=-2.0, dropout=0.0)
    assert torch.equal(cell.bias[:8], torch.zeros(8))
    assert torch.equal(cell.bias[8:], torch.full((8,), -2.0))
    w = cell.weight.view(8, 1, 8, 3)
    bound = math.sqrt(3 / 8)
    assert w[..., 0].abs().max() <= bound
    assert w[..., 1:].abs().max() <= bound * math.sqrt(0.5) + 1e-7
    assert cell.weight_c.abs().max() <= math.sqrt(1.5) + 1e-7


def _weight_with_seed(**kwargs):
    torch.manual_seed(0)
    cell = SRUCell(6, 4, **kwargs)
    return cell.weight.detach().view(6, 1, 4, cell.num_matrices)


def test_init_recipe_scalings_relative_to_the_plain_init():
    # Same seed, same draws: each option rescales exactly the columns the recipe names.
    plain = _weight_with_seed(rescale=False)
    torch.testing.assert_close(_weight_with_seed(rescale=False, layer_norm=True), plain * 0.1)
    drop = _weight_with_seed(rescale=False, dropout=0.36)
    torch.testing.assert_close(drop[..., 0], plain[..., 0] * 0.8)
    torch.testing.assert_close(drop[..., 1:], plain[..., 1:])
    torch.testing.assert_close(_weight_with_seed(rescale=False, rnn_dropout=0.19), plain * 0.9)
    scaled = _weight_with_seed(rescale=True, highway_bias=-1.0)
    alpha = math.sqrt(1 + 2 * math.exp(-1.0))
    torch.testing.assert_close(scaled[..., 3], plain[..., 3] * alpha)
    torch.testing.assert_close(scaled[..., :3], plain[..., :3])


def test_rescale_constant_and_defaults():
    alpha = math.sqrt(1 + 2 * math.exp(-2.0))
    assert SRUCell(8, 8, highway_bias=-2.0).scale_x.item() == pytest.approx(alpha)  # cell: on
    assert SRUCell(8, 8, highway_bias=-2.0, rescale=False).scale_x.item() == 1.0
    assert SRUCell(8, 8, highway_bias=-2.0, has_skip_term=False).scale_x.item() == 1.0
    stack = SRU(8, 8, highway_bias=-2.0)                                            # SRU: off
    assert stack.rnn_lst[0].rescale is False and stack.rnn_lst[0].scale_x.item() == 1.0
    rescaled = SRU(8, 8, highway_bias=-2.0, rescale=True)
    assert rescaled.rnn_lst[0].scale_x.item() == pytest.approx(alpha)


def test_rescale_scales_the_skip_input():
    # With the highway gate shut (b_r very negative) h = alpha * x exactly, for k = 3.
    cell = SRUCell(6, 6, highway_bias=-2.0, rescale=True).double()
    with torch.no_grad():
        cell.bias[6:] = -80.0
    x = torch.randn(4, 2, 6, dtype=torch.float64)
    torch.testing.assert_close(cell(x)[0], x * math.sqrt(1 + 2 * math.exp(-2.0)))
    cell.rescale = False
    torch.testing.assert_close(cell(x)[0], x)


def test_scale_x_from_a_checkpoint_is_used():
    src = SRUCell(6, 6, rescale=True).double()
    with torch.no_grad():
        src.bias[6:] = -80.0
    state = {**src.state_dict(), "scale_x": torch.tensor([3.0], dtype=torch.float64)}
    dst = SRUCell(6, 6, rescale=True).double()
    dst.load_state_dict(state)
    x = torch.randn(3, 2, 6, dtype=torch.float64)
    torch.testing.assert_close(dst(x)[0], 3.0 * x)


def test_v1_has_frozen_zero_weight_c():
    stack = SRU(6, 6, num_layers=2, v1=True).double()
    for cell in stack.rnn_lst:
        assert torch.equal(cell.weight_c, torch.zeros(12, dtype=torch.float64))
        assert not cell.weight_c.requires_grad
    h, _ = stack(torch.randn(5, 2, 6, dtype=torch.float64))
    h.sum().backward()
    assert all(cell.weight_c.grad is None for cell in stack.rnn_lst)
    assert all(cell.weight.grad is not None for cell in stack.rnn_lst)


def test_weight_c_init_bound():
    cell = SRUCell(8, 8, weight_c_init=0.01)
    assert cell.weight_c.abs().max() <= 0.01


def test_state_dict_keys_follow_the_official_layout():
    keys = set(SRU(6, 4, num_layers=2, projection_size=3, layer_norm=True,
                   proj_input_to_hidden_first=True, bidirectional=True).state_dict())
    assert keys == {"input_to_hidden.weight"} | {
        f"rnn_lst.{i}.{name}" for i in range(2) for name in (
            "weight", "weight_proj", "weight_c", "bias", "scale_x",
            "layer_norm.weight", "layer_norm.bias")}


# ---------------------------------------------------------------- dropout

def test_dropout_mask_is_shared_over_time_and_redrawn_per_forward():
    torch.manual_seed(0)
    cell = SRUCell(16, 16, dropout=0.5, has_skip_term=False).train()
    x = torch.randn(6, 4, 16)
    h1, _ = cell(x)
    dropped = h1 == 0  # h = r * m * c: a dropped unit is exactly 0
    assert dropped.any() and not dropped.all()
    assert torch.equal(dropped, dropped[:1].expand_as(dropped))  # same units at every step
    assert not torch.equal(dropped[0, 0], dropped[0, 1])          # one mask per sequence
    h2, _ = cell(x)
    assert not torch.equal(h2 == 0, dropped)                      # a new mask per forward
    assert not (cell.eval()(x)[0] == 0).any()                     # no dropout in eval mode


def test_rnn_dropout_masks_the_input_once_per_sequence():
    seen = []

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 24, bias=False)

        def forward(self, x):
            seen.append(x)
            return self.linear(x)

    torch.manual_seed(0)
    cell = SRUCell(8, 8, rnn_dropout=0.5, custom_m=Recorder()).train()
    cell(torch.randn(5, 3, 8) + 3.0)  # + 3: no input entry is exactly 0 by chance
    dropped = seen[0] == 0
    assert dropped.any() and not dropped.all()
    assert torch.equal(dropped, dropped[:1].expand_as(dropped))


def test_last_layer_has_no_dropout():
    stack = SRU(8, 8, num_layers=3, dropout=0.3)
    assert [cell.dropout for cell in stack.rnn_lst] == [0.3, 0.3, 0.0]


# ---------------------------------------------------------------- padding and state

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_padded_batch_equals_each_sequence_alone(backend, bidirectional):
    torch.manual_seed(0)
    stack = randomize(SRU(5, 4, num_layers=2, bidirectional=bidirectional, backend=backend))
    stack = stack.double()
    lengths = [7, 3, 5]
    x = torch.randn(7, 3, 5, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(2, 3, stack.output_size, dtype=torch.float64)
    mask_pad = torch.arange(7).unsqueeze(1) >= torch.tensor(lengths).unsqueeze(0)
    h, c = stack(x, c0, mask_pad=mask_pad)
    assert torch.equal(h[mask_pad], torch.zeros_like(h[mask_pad]))  # padded outputs are 0
    for b, n in enumerate(lengths):
        h_alone, c_alone = stack(x[:n, b:b + 1].detach(), c0[:, b:b + 1])
        torch.testing.assert_close(h[:n, b:b + 1], h_alone)
        torch.testing.assert_close(c[:, b:b + 1], c_alone)
    (h.sum() + c.sum()).backward()
    assert torch.equal(x.grad[mask_pad], torch.zeros_like(x.grad[mask_pad]))  # no gradient
    assert (x.grad[~mask_pad] != 0).all()


def test_padded_steps_keep_the_cell_state():
    cell = randomize(SRUCell(4, 4)).double()
    x = torch.randn(4, 1, 4, dtype=torch.float64)
    mask_pad = torch.tensor([[0], [1], [1], [0]], dtype=torch.uint8)
    _, c_masked = cell(x, mask_pad=mask_pad)
    _, c_skipped = cell(x[[0, 3]])
    torch.testing.assert_close(c_masked, c_skipped)


def test_two_chunks_carrying_c_equal_one_run():
    stack = randomize(SRU(5, 5, num_layers=3)).double()
    x = torch.randn(9, 2, 5, dtype=torch.float64)
    h, c = stack(x)
    h1, c1 = stack(x[:4])
    h2, c2 = stack(x[4:], c1)
    torch.testing.assert_close(torch.cat([h1, h2]), h)
    torch.testing.assert_close(c2, c)


def test_c0_goes_to_its_own_layer():
    stack = randomize(SRU(5, 3, num_layers=2, bidirectional=True)).double()
    x = torch.randn(4, 2, 5, dtype=torch.float64)
    c0 = torch.randn(2, 2, 6, dtype=torch.float64)
    h, c = stack(x, c0)
    h_manual, c_first = stack.rnn_lst[0](x, c0[0])
    h_manual, c_second = stack.rnn_lst[1](h_manual, c0[1])
    torch.testing.assert_close(h, h_manual)
    torch.testing.assert_close(c, torch.stack([c_first, c_second]))


def test_single_step_input_of_a_cell():
    cell = randomize(SRUCell(4, 4)).double()
    x = torch.randn(2, 4, dtype=torch.float64)
    c0 = torch.randn(2, 4, dtype=torch.float64)
    h, c = cell(x, c0)
    h_seq, c_seq = cell(x.unsqueeze(0), c0)
    assert h.shape == (2, 4)
    torch.testing.assert_close(h, h_seq[0])
    torch.testing.assert_close(c, c_seq)


# ---------------------------------------------------------------- layer norm

def test_pre_layer_norm_feeds_the_matmul_and_the_k4_skip():
    # With k = 4 the skip term is u3 (from the normalized input), so the layer equals a plain
    # layer applied to LayerNorm(x).
    ln_cell = randomize(SRUCell(6, 4, layer_norm=True)).double()
    assert ln_cell.layer_norm.normalized_shape == (6,)
    plain = SRUCell(6, 4).double()
    plain.load_state_dict(ln_cell.state_dict(), strict=False)
    x = torch.randn(5, 3, 6, dtype=torch.float64)
    torch.testing.assert_close(ln_cell(x)[0], plain(ln_cell.layer_norm(x))[0])


def test_post_layer_norm_normalizes_h():
    cell = randomize(SRUCell(6, 4, bidirectional=True, layer_norm=True, normalize_after=True))
    cell = cell.double()
    assert cell.layer_norm.normalized_shape == (8,)
    plain = SRUCell(6, 4, bidirectional=True).double()
    plain.load_state_dict(cell.state_dict(), strict=False)
    x = torch.randn(5, 3, 6, dtype=torch.float64)
    h, c = cell(x)
    h_plain, c_plain = plain(x)
    torch.testing.assert_close(h, cell.layer_norm(h_plain))
    torch.testing.assert_close(c, c_plain)


# ---------------------------------------------------------------- project_skip (the CNTK speech SRU)

@pytest.mark.parametrize("backend", BACKENDS)
def test_project_skip_is_the_cntk_highway_with_its_own_projection(backend):
    """project_skip=True gives k = 4 at equal widths and h = r*tanh(c) + (1-r)*(W_h x): SRU_12L.ndl's
    FastKernelNN (with v1: no c_{t-1} term in the gates), checked against the formula, with gradients."""
    torch.manual_seed(0)
    cell = randomize(SRUCell(4, 4, use_tanh=True, v1=True, project_skip=True, backend=backend)).double()
    with torch.no_grad():
        cell.weight_c.zero_()  # v1's init (randomized above with every parameter)
    assert cell.num_matrices == 4 and SRUCell(4, 4).num_matrices == 3
    x = torch.randn(6, 3, 4, dtype=torch.float64, requires_grad=True)
    h, c_last = cell(x)
    u = (x.reshape(-1, 4) @ cell.weight).view(6, 3, 4, 4)     # (L, B, d, k)
    b_f, b_r = cell.bias[:4], cell.bias[4:]
    c = torch.zeros(3, 4, dtype=torch.float64)
    expected = []
    for t in range(6):
        f = torch.sigmoid(u[t, :, :, 1] + b_f)
        c = f * c + (1 - f) * u[t, :, :, 0]
        r = torch.sigmoid(u[t, :, :, 2] + b_r)
        expected.append(r * torch.tanh(c) + (1 - r) * u[t, :, :, 3])
    expected = torch.stack(expected)
    torch.testing.assert_close(h, expected)
    torch.testing.assert_close(c_last, c)
    grads = torch.autograd.grad(h.sum(), [x, cell.weight])
    wanted = torch.autograd.grad(expected.sum(), [x, cell.weight])
    for got, want in zip(grads, wanted):
        torch.testing.assert_close(got, want)


def test_project_skip_reaches_every_layer_of_a_stack():
    stack = SRU(6, 8, num_layers=3, project_skip=True)
    assert [cell.num_matrices for cell in stack.rnn_lst] == [4, 4, 4]
