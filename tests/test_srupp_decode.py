"""SRU++ incremental decoding (sru.srupp_decode) gives what the full causal forward gives."""
import pytest
import torch

from sru import SRUpp, SRUppCache
from sru_helpers import BACKENDS, randomize

T, B = 7, 2


def causal(length, mem_len=0):
    hidden = torch.ones(length, mem_len + length, dtype=torch.bool).triu(mem_len + 1)
    return torch.zeros(hidden.shape, dtype=torch.float64).masked_fill(hidden, float("-inf"))


CONFIGS = {
    "plain": dict(num_layers=2, num_heads=2),
    "every_2_pre_norm": dict(num_layers=3, attention_every_n_layers=2, layer_norm=True),
    "post_norm_k4_proj": dict(num_layers=2, layer_norm=True, normalize_after=True,
                              proj_input_to_hidden_first=True, rescale=True),
}


def build(name, backend="auto", input_size=5):
    model = SRUpp(input_size, 4, 6, **CONFIGS[name], backend=backend).double().eval()
    return randomize(model)


def decode_each(model, x, cache=None):
    """x (T, B, in) one token at a time through ``model.decode``: the stacked outputs and the last cache."""
    outs = []
    for t in range(x.size(0)):
        h, cache = model.decode(x[t], cache)
        outs.append(h)
    return torch.stack(outs), cache


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CONFIGS)
def test_token_by_token_equals_full_forward(name, backend):
    model = build(name, backend)
    x = torch.randn(T, B, 5, dtype=torch.float64)
    with torch.no_grad():
        want, c_want, _ = model(x, attn_mask=causal(T))
    steps, cache = decode_each(model, x)
    torch.testing.assert_close(steps, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(cache.c, c_want, rtol=0, atol=1e-12)
    assert cache.length == T


@pytest.mark.parametrize("name", CONFIGS)
def test_prefill_chunk_then_steps_equals_full_forward(name):
    model = build(name)
    x = torch.randn(T, B, 5, dtype=torch.float64)
    with torch.no_grad():
        want, _, _ = model(x, attn_mask=causal(T))
    h_prompt, cache = model.decode(x[:3])        # one chunk: causal inside it
    h_mid, cache = model.decode(x[3:5], cache)   # a second chunk over the cache
    outs = [h_prompt, h_mid]
    for t in range(5, T):
        h, cache = model.decode(x[t], cache)
        outs.append(h.unsqueeze(0))
    torch.testing.assert_close(torch.cat(outs), want, rtol=0, atol=1e-12)


def test_cache_from_memory_continues_a_segment_forward():
    """Streaming evaluation: decoding after segment 1 equals forward(segment 2, memory=...)."""
    model = build("every_2_pre_norm")  # pre-norm: memory enters unnormalized (official layout)
    x1, x2 = torch.randn(4, B, 5, dtype=torch.float64), torch.randn(3, B, 5, dtype=torch.float64)
    with torch.no_grad():
        _, c1, state1 = model(x1, attn_mask=causal(4))
        want, c_want, _ = model(x2, c0=c1, memory=state1["saved_inputs"], attn_mask=causal(3, 4))
    cache = model.cache_from_memory(state1["saved_inputs"], c1)
    outs = []
    for t in range(3):
        h, cache = model.decode(x2[t], cache)
        outs.append(h)
    torch.testing.assert_close(torch.stack(outs), want, rtol=0, atol=1e-12)
    torch.testing.assert_close(cache.c, c_want, rtol=0, atol=1e-12)


def test_max_context_is_a_sliding_window_and_select_picks_batch_items():
    """With max_context=3 each position sees the 3 before it and itself: a band mask."""
    model = build("plain")
    x = torch.randn(T, B, 5, dtype=torch.float64)
    steps = torch.arange(T)
    hidden = (steps[None, :] > steps[:, None]) | (steps[None, :] < steps[:, None] - 3)
    band = torch.zeros(T, T, dtype=torch.float64).masked_fill(hidden, float("-inf"))
    with torch.no_grad():
        want, _, _ = model(x, attn_mask=band)
    cache, outs = None, []
    for t in range(T):
        h, cache = model.decode(x[t], cache, max_context=3)
        outs.append(h)
    torch.testing.assert_close(torch.stack(outs), want, rtol=0, atol=1e-12)
    assert cache.length == 3 and all(k.shape == (3, B, 6) for k in cache.keys)
    h_both, _ = model.decode(x[0], cache)
    h_one, _ = model.decode(x[0, 1:], cache.select(torch.tensor([1])))
    torch.testing.assert_close(h_one, h_both[1:], rtol=0, atol=1e-12)


def test_decode_refuses_bidirectional_training_and_wrong_batch():
    with pytest.raises(ValueError, match="unidirectional"):
        SRUpp(4, 4, 4, bidirectional=True).eval().decode(torch.randn(B, 4))
    with pytest.raises(ValueError, match="eval mode"):
        SRUpp(4, 4, 4).train().decode(torch.randn(B, 4))
    model = SRUpp(4, 4, 4).eval()
    _, cache = model.decode(torch.randn(B, 4))
    assert isinstance(cache, SRUppCache)
    with pytest.raises(ValueError, match="cache for batch 3"):
        model.decode(torch.randn(3, 4), cache)


def test_cache_buffers_survive_growth_windows_and_branching():
    """The keys/values buffers (sru.srupp_decode.KeyStore) grow and are replaced past their capacity, and
    a cache decoded from twice (two beams from one) leaves the first branch's cache intact: every path
    equals a fresh decode that copies everything."""
    model = build("plain")
    length = 40  # past the first buffer's capacity (16), with and without a window
    x = torch.randn(length, B, 5, dtype=torch.float64)
    with torch.no_grad():
        want, _, _ = model(x, attn_mask=causal(length))
    outs, cache = decode_each(model, x)
    torch.testing.assert_close(outs, want, rtol=0, atol=1e-12)
    windowed = None
    for t in range(length):
        _, windowed = model.decode(x[t], windowed, max_context=5)
    assert windowed.length == 5
    fork = windowed
    h_a, branch_a = model.decode(x[0], fork)        # appends in place: fork's buffer frontier
    h_b, branch_b = model.decode(x[1], fork)        # fork is no longer the frontier: copied
    h_a2, _ = model.decode(x[2], branch_a)          # branch a still sees its own position
    fresh = lambda c: type(c)([k.clone() for k in c.keys], [v.clone() for v in c.values], c.c.clone())
    torch.testing.assert_close(h_b, model.decode(x[1], fresh(fork))[0], rtol=0, atol=0)
    torch.testing.assert_close(h_a2, model.decode(x[2], fresh(branch_a))[0], rtol=0, atol=0)
    torch.testing.assert_close(branch_a.keys[0][-1:], model.decode(x[0], fresh(fork))[1].keys[0][-1:],
                               rtol=0, atol=0)


def test_direct_recurrence_equals_the_layers_own_recurrence():
    """A decoding step's recurrence (one direct kernel call) gives the numbers of apply_recurrence."""
    from sru.srupp_decode import direct_recurrence

    for name in CONFIGS:
        model = build(name)
        for cell in model.rnn_lst:
            U = torch.randn(1, B, cell.output_size * cell.num_matrices, dtype=torch.float64)
            residual = torch.randn(1, B, cell.input_size, dtype=torch.float64)
            c0 = torch.randn(B, cell.output_size, dtype=torch.float64)
            with torch.no_grad():
                got = direct_recurrence(cell, U, residual, c0)
                want = cell.apply_recurrence(U, residual, c0, None, None)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
