"""model=srupp as a shared encoder: segment memory carried between calls, one-step decoding,
and a tiny word LM that trains end to end."""
import pytest
import torch
from conftest import check_attention_lm_run, check_step_decoding, model_config, tiny_lm_overrides

from tasks.common.encoders import build_encoder
from tasks.common.rnn_encoders import detach_state

CFG = model_config("srupp", hidden_size=8, proj_size=4, num_layers=2, num_heads=2, dropout=0.0,
                   attn_dropout=0.0, layer_norm=False)


def encoder(**overrides):
    torch.manual_seed(0)
    enc = build_encoder(dict(CFG, **overrides), 6, causal=True).double().eval()
    for cell in enc.rnn.rnn_lst:  # attention switched on (it starts at alpha = 0)
        cell.transform_module.alpha.data.fill_(0.7)
    return enc


def test_segments_with_memory_equal_one_causal_pass():
    """mem_len=null: each window sees the previous one, so two windows of 4 equal one pass over 8
    for the second window's positions whose context fits (here all of them: 4 <= 4)."""
    enc = encoder(mem_len=None)
    x = torch.randn(8, 3, 6, dtype=torch.float64)
    whole, _ = enc(x)
    first, state = enc(x[:4])
    second, _ = enc(x[4:], detach_state(state))
    torch.testing.assert_close(torch.cat([first, second]), whole, rtol=0, atol=1e-12)


def test_mem_len_zero_has_no_memory_and_truncates():
    enc = encoder(mem_len=0)
    x = torch.randn(8, 3, 6, dtype=torch.float64)
    _, state = enc(x[:4])
    assert state[1] is None
    enc3 = encoder(mem_len=3)
    _, state = enc3(x[:4])
    _, state = enc3(x[4:6], state)
    assert [m.shape[0] for m in state[1]] == [3, 3]


def test_step_decoding_equals_forward_and_continues_a_state():
    enc = encoder(mem_len=None)
    st = check_step_decoding(enc, torch.randn(6, 2, 6, dtype=torch.float64))
    reordered = enc.reorder_state(st, torch.tensor([1, 1]))
    assert reordered.c.shape == (2, 2, 8) and torch.equal(reordered.c[:, 0], st.c[:, 1])


def test_causal_task_refuses_bidirectional_srupp():
    with pytest.raises(ValueError, match="bidirectional"):
        build_encoder(dict(CFG, bidirectional=True), 6, causal=True)


def test_return_all_layers_gives_every_layer_output():
    enc = encoder(mem_len=0)
    outs, _ = enc(torch.randn(5, 2, 6, dtype=torch.float64), return_all_layers=True)
    last, _ = enc(torch.randn(5, 2, 6, dtype=torch.float64))
    assert len(outs) == 2 and outs[-1].shape == last.shape == (5, 2, 8)


@pytest.mark.slow
def test_tiny_srupp_lm_trains_end_to_end(run_train, tmp_path):
    overrides = tiny_lm_overrides("srupp", steps=24) + ["model.proj_size=8", "model.attn_dropout=0.0"]
    check_attention_lm_run(tmp_path, run_train(overrides, tmp_path))
    from tasks.lm.sample import main as sample_lm
    text = sample_lm([str(tmp_path), "--prompt", "the cat", "--tokens", "5", "--seed", "1"])
    assert text.startswith("the cat ") and len(text.split()) == 7
