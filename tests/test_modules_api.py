"""SRU / SRUCell interfaces: input formats and returns, the custom_m hook, bad input, backends, repr."""
import copy
import pickle

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_sequence, pad_packed_sequence

from sru import SRU, SRUCell, quantize_dynamic
from sru.ops.reference import elementwise_recurrence_reference
from sru_helpers import FUSED, grads_of, randomize


# ---------------------------------------------------------------- input formats and returns

def test_packed_sequence_round_trip():
    stack = randomize(SRU(4, 3, num_layers=2, bidirectional=True)).double()
    seqs = [torch.randn(n, 4, dtype=torch.float64) for n in (3, 6, 2)]  # unsorted lengths
    packed = pack_sequence(seqs, enforce_sorted=False)
    h_packed, c = stack(packed)
    assert isinstance(h_packed, torch.nn.utils.rnn.PackedSequence)
    h, lengths = pad_packed_sequence(h_packed)
    assert lengths.tolist() == [3, 6, 2]
    for b, seq in enumerate(seqs):
        h_alone, c_alone = stack(seq.unsqueeze(1))
        torch.testing.assert_close(h[:len(seq), b:b + 1], h_alone)
        torch.testing.assert_close(c[:, b:b + 1], c_alone)


def test_batch_first_matches_time_major():
    args = dict(num_layers=2, bidirectional=True)
    time_major = randomize(SRU(4, 3, **args)).double()
    batch_first = SRU(4, 3, batch_first=True, **args).double()
    batch_first.load_state_dict(time_major.state_dict())
    x = torch.randn(3, 6, 4, dtype=torch.float64)       # (B, L, D)
    mask_pad = torch.zeros(3, 6, dtype=torch.bool)      # (B, L)
    mask_pad[1, 4:] = True
    c0 = torch.randn(2, 3, 6, dtype=torch.float64)      # (layers, B, dirs*d) in both layouts
    h, c = batch_first(x, c0, mask_pad=mask_pad)
    h_ref, c_ref = time_major(x.transpose(0, 1), c0, mask_pad=mask_pad.t())
    assert h.shape == (3, 6, 6)
    torch.testing.assert_close(h, h_ref.transpose(0, 1))
    torch.testing.assert_close(c, c_ref)


def test_nn_rnn_compatible_return():
    stack = randomize(SRU(4, 3, num_layers=2, bidirectional=True)).double()
    compat = SRU(4, 3, num_layers=2, bidirectional=True, nn_rnn_compatible_return=True).double()
    compat.load_state_dict(stack.state_dict())
    x = torch.randn(5, 2, 4, dtype=torch.float64)
    _, c = stack(x)
    _, c_compat = compat(x)
    assert c_compat.shape == (4, 2, 3)  # like nn.LSTM: (layers * dirs, B, d)
    for layer in range(2):
        for direction in range(2):
            torch.testing.assert_close(c_compat[layer * 2 + direction],
                                       c[layer, :, direction * 3:(direction + 1) * 3])


def test_input_to_hidden_projection_first():
    stack = SRU(10, 4, num_layers=2, proj_input_to_hidden_first=True)
    assert stack.input_to_hidden.weight.shape == (4, 10)
    assert stack.rnn_lst[0].num_matrices == 3
    assert SRU(4, 4, proj_input_to_hidden_first=True).input_to_hidden is None


# ---------------------------------------------------------------- custom_m hook

class _LinearU(nn.Module):
    """A custom U module; optionally also returns per-step gate weights V."""

    def __init__(self, d_in, width_u, width_v=0):
        super().__init__()
        self.u = nn.Linear(d_in, width_u, bias=False)
        self.v = nn.Linear(d_in, width_v, bias=False) if width_v else None

    def forward(self, x):
        return self.u(x) if self.v is None else (self.u(x), self.v(x))


def test_custom_m_returning_u_equals_the_weight_path():
    cell = randomize(SRUCell(5, 4, bidirectional=True, custom_m=_LinearU(5, 32))).double()
    assert cell.weight is None and "weight" not in cell.state_dict()
    plain = SRUCell(5, 4, bidirectional=True).double()
    plain.load_state_dict({**cell.state_dict(), "weight": cell.custom_m.u.weight.t()},
                          strict=False)
    x = torch.randn(6, 2, 5, dtype=torch.float64)
    torch.testing.assert_close(cell(x)[0], plain(x)[0])


def test_custom_m_with_per_step_gate_weights():
    cell = randomize(SRUCell(5, 4, custom_m=_LinearU(5, 16, 8))).double()
    x = torch.randn(6, 2, 5, dtype=torch.float64)
    h, c = cell(x)
    U = cell.custom_m.u(x)
    V = cell.custom_m.v(x) + cell.weight_c  # the official package's flat sum
    h_ref, c_ref = elementwise_recurrence_reference(U, x, V, cell.bias, None, 4,
                                                    scale_x=cell.scale_x.item())
    torch.testing.assert_close(h, h_ref)
    torch.testing.assert_close(c, c_ref)


def test_custom_m_list_per_layer_and_copies():
    mods = [_LinearU(4, 12), _LinearU(4, 12)]
    stack = SRU(4, 4, num_layers=2, custom_m=mods)
    assert stack.rnn_lst[0].custom_m is mods[0] and stack.rnn_lst[1].custom_m is mods[1]
    shared = SRU(4, 4, num_layers=2, custom_m=_LinearU(4, 12))
    assert shared.rnn_lst[0].custom_m is not shared.rnn_lst[1].custom_m  # deep copies


@pytest.mark.parametrize("copy_of", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m)),
                                     quantize_dynamic], ids=["deepcopy", "pickle", "quantize_dynamic"])
def test_custom_m_survives_copies(copy_of):
    stack = randomize(SRU(4, 4, num_layers=2, custom_m=_LinearU(4, 12))).eval()
    x = torch.randn(6, 2, 4)
    copied = copy_of(stack)
    assert all(cell.custom_m is not None for cell in copied.rnn_lst)
    with torch.no_grad():
        torch.testing.assert_close(copied(x)[0], stack(x)[0], atol=0.05, rtol=0.05)  # int8: close


def test_custom_m_with_a_wrong_width_is_rejected():
    cell = SRUCell(5, 4, custom_m=_LinearU(5, 10))
    with pytest.raises(ValueError, match=r"U of shape \(3, 2, 16\), got \(3, 2, 10\)"):
        cell(torch.randn(3, 2, 5))


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, message", [
    (lambda m: m(torch.randn(5, 3, 7)), r"input of shape \(length, batch, 6\), got \(5, 3, 7\)"),
    (lambda m: m(torch.randn(5, 6)), r"input of shape \(length, batch, 6\), got \(5, 6\)"),
    (lambda m: m(torch.ones(5, 3, 6, dtype=torch.long)), r"floating-point.*torch.int64"),
    (lambda m: m(torch.randn(5, 3, 6), torch.zeros(2, 3, 4)),
     r"c0 of shape .* = \(2, 3, 8\), got \(2, 3, 4\)"),
    (lambda m: m(torch.randn(5, 3, 6), mask_pad=torch.zeros(3, 5)),
     r"mask_pad of shape \(length, batch\) = \(5, 3\).*got \(3, 5\)"),
])
def test_bad_input_raises_one_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call(SRU(6, 4, num_layers=2, bidirectional=True))


def test_dtype_mismatch_names_the_fix():
    with pytest.raises(ValueError, match=r"dtype torch.float32 .*got torch.float64"):
        SRU(6, 4)(torch.randn(5, 3, 6, dtype=torch.float64))


def test_bad_input_batch_first_names_its_layout():
    with pytest.raises(ValueError, match=r"\(batch, length, 6\), got \(2, 5, 3\)"):
        SRU(6, 4, batch_first=True)(torch.randn(2, 5, 3))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="hidden_size to be a positive int, got 0"):
        SRU(6, 0)
    with pytest.raises(ValueError, match=r"dropout in \[0, 1\), got 1.5"):
        SRU(6, 4, dropout=1.5)


def test_cell_bad_c0():
    with pytest.raises(ValueError, match=r"c0 of shape .* = \(3, 4\), got \(3, 5\)"):
        SRUCell(4, 4)(torch.randn(2, 3, 4), torch.zeros(3, 5))


# ---------------------------------------------------------------- backends and precision

@pytest.mark.parametrize("backend", FUSED)
def test_fused_backend_matches_reference(backend):
    # Awkward sizes, dropout, padding, a k = 4 first layer, random upstream gradients.
    kwargs = dict(num_layers=2, bidirectional=True, dropout=0.3, rnn_dropout=0.1, rescale=True,
                  highway_bias=-1.0)
    runs = []
    for name in ("reference", backend):
        torch.manual_seed(0)
        stack = randomize(SRU(13, 10, backend=name, **kwargs), scale=0.3).train()
        x = torch.randn(17, 5, 13, requires_grad=True)
        c0 = torch.randn(2, 5, 20, requires_grad=True)
        mask_pad = torch.arange(17).unsqueeze(1) >= torch.tensor([17, 9, 1, 16, 12]).unsqueeze(0)
        h, c = stack(x, c0, mask_pad=mask_pad)
        gen = torch.Generator().manual_seed(1)
        loss = (h * torch.randn(h.shape, generator=gen)).sum() + \
            (c * torch.randn(c.shape, generator=gen)).sum()
        loss.backward()
        runs.append([h, c] + grads_of(stack, x, c0))
    for ref, fused in zip(*runs):
        assert torch.isfinite(fused).all()
        torch.testing.assert_close(fused, ref, rtol=1e-4, atol=1e-5)


def test_autocast_runs_the_recurrence_in_float32():
    stack = SRU(8, 8, num_layers=2)
    x = torch.randn(5, 2, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h, c = stack(x)
    assert h.dtype == torch.float32 and c.dtype == torch.float32
    torch.testing.assert_close(h, stack(x)[0], rtol=0.05, atol=0.05)
    h.sum().backward()
    assert stack.rnn_lst[0].weight.grad is not None


def test_repr_mentions_the_options():
    text = repr(SRU(6, 4, bidirectional=True, dropout=0.2, batch_first=True))
    assert "bidirectional=True" in text and "dropout=0.2" in text and "batch_first=True" in text
