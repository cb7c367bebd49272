"""model=transformer_lm (the Transformer baseline of the SRU++ comparison): causality, ALiBi segment memory
equal to one pass, step decoding equal to the forward, padding, and a tiny word LM end to end."""
import pytest
import torch
from conftest import check_attention_lm_run, check_step_decoding, model_config, tiny_lm_overrides

from tasks.common.encoders import build_encoder
from tasks.common.rnn_encoders import detach_state
from tasks.common.transformer_lm_encoder import alibi_slopes
from tasks.engine.errors import ConfigError

CFG = model_config("transformer_lm", hidden_size=8, num_layers=2, num_heads=2, ffn_size=12, dropout=0.0,
                   attn_dropout=0.0)


def encoder(causal=True, **overrides):
    torch.manual_seed(0)
    return build_encoder(dict(CFG, **overrides), 6, causal=causal).double().eval()


def test_alibi_slopes_are_the_papers():
    assert alibi_slopes(8).tolist() == [2 ** -(i + 1) for i in range(8)]
    # not a power of two: the 4 slopes of 4 heads, then every other of the 8 heads' slopes
    assert alibi_slopes(6).tolist() == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]


def test_causal_output_does_not_see_the_future():
    enc = encoder()
    x = torch.randn(7, 2, 6, dtype=torch.float64)
    changed = x.clone()
    changed[4:] += 1.0
    out, _ = enc(x)
    out2, _ = enc(changed)
    torch.testing.assert_close(out[:4], out2[:4], rtol=0, atol=0)
    assert not torch.allclose(out[4:], out2[4:])


def test_segments_with_memory_equal_one_causal_pass():
    """mem_len=null: window 2 attends to window 1's layer inputs at their ALiBi distances, as one pass does."""
    enc = encoder(mem_len=None)
    x = torch.randn(8, 3, 6, dtype=torch.float64)
    whole, _ = enc(x)
    first, state = enc(x[:4])
    second, state = enc(x[4:], detach_state(state))
    torch.testing.assert_close(torch.cat([first, second]), whole, rtol=0, atol=1e-12)
    assert [m.shape for m in state] == [(4, 3, 8), (4, 3, 8)]  # only the latest window is kept


def test_mem_len_zero_and_n():
    x = torch.randn(8, 3, 6, dtype=torch.float64)
    _, state = encoder(mem_len=0)(x[:4])
    assert state is None
    enc3 = encoder(mem_len=3)
    _, state = enc3(x[:4])
    assert [m.shape[0] for m in state] == [3, 3]  # a first window longer than mem_len is cut too
    _, state = enc3(x[4:6], state)
    assert [m.shape[0] for m in state] == [3, 3]


def test_step_decoding_equals_forward_and_continues_a_state():
    enc = encoder(mem_len=None)
    st = check_step_decoding(enc, torch.randn(6, 2, 6, dtype=torch.float64))
    assert [m.shape[0] for m in st] == [6, 6]  # step keeps every position (mem_len null)
    reordered = enc.reorder_state(st, torch.tensor([1, 1]))
    assert torch.equal(reordered[0][:, 0], st[0][:, 1])


def test_padding_changes_nothing_for_real_positions():
    """Non-causal: a padded batch entry gives the outputs of the same sequence alone, zeros on padding."""
    enc = encoder(causal=False, mem_len=0)
    x = torch.randn(6, 2, 6, dtype=torch.float64)
    mask_pad = torch.zeros(6, 2, dtype=torch.bool)
    mask_pad[4:, 1] = True
    out, _ = enc(x.masked_fill(mask_pad.unsqueeze(-1), 123.0), mask_pad=mask_pad)
    alone, _ = enc(x[:4, 1:])
    torch.testing.assert_close(out[:4, 1:], alone, rtol=0, atol=1e-12)
    assert out[4:, 1].abs().max() == 0
    with pytest.raises(ValueError, match="memory"):
        enc(x, state=(x, x), mask_pad=mask_pad)


def test_bad_configs_are_refused():
    with pytest.raises(ConfigError, match="bidirectional"):
        build_encoder(dict(CFG, bidirectional=True), 6, causal=True)
    with pytest.raises(ValueError, match="multiple of model.num_heads"):
        build_encoder(dict(CFG, num_heads=3), 6)
    with pytest.raises(ValueError, match=r"\(L, B, 6\)"):
        encoder()(torch.randn(4, 2, 5, dtype=torch.float64))


@pytest.mark.slow
def test_tiny_transformer_lm_trains_end_to_end(run_train, tmp_path):
    overrides = tiny_lm_overrides("transformer_lm", steps=24) + ["model.ffn_size=32"]
    check_attention_lm_run(tmp_path, run_train(overrides, tmp_path))
