"""The encoder interface every task relies on: build_encoder rules, all-layer outputs, one-step decoding,
state reordering for beam search, and the LSTM's per-layer modules loading older checkpoints."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import ROOT, compose, model_config
from torch import nn

from tasks.common.encoders import ENCODERS, build_encoder, check_encoder_config

SRU_CFG = model_config("sru", hidden_size=6, num_layers=3, dropout=0.0, rnn_dropout=0.0)
LSTM_CFG = model_config("lstm", hidden_size=6, num_layers=3, dropout=0.0)


def test_every_encoder_is_found_whatever_the_task():
    assert {"sru", "lstm", "cnn"} <= set(ENCODERS)
    cnn = build_encoder(compose(["task=lm", "model=cnn"]).model, 8)  # nothing of the classification task imported
    out, state = cnn(torch.randn(5, 2, 8))
    assert out.shape == (5, 2, cnn.output_size) and state is None and not cnn.bidirectional


def test_causal_tasks_refuse_bidirectional_encoders_and_bad_values_name_the_key():
    with pytest.raises(ValueError, match="model.bidirectional=true"):
        build_encoder({**SRU_CFG, "bidirectional": True}, 4, causal=True)
    assert build_encoder({**SRU_CFG, "bidirectional": True}, 4).bidirectional
    for key, value in (("hidden_size", -5), ("num_layers", 0), ("dropout", 1.5), ("hidden_size", "abc")):
        with pytest.raises(ValueError, match=f"model.{key}: expected"):
            check_encoder_config({**SRU_CFG, key: value})
    with pytest.raises(ValueError, match=r"model.highway_bias: not a key of model.*conf/model/lstm.yaml"):
        check_encoder_config({**LSTM_CFG, "highway_bias": -3})


@pytest.mark.slow
def test_bidirectional_language_model_fails_before_loading_data():
    proc = subprocess.run([sys.executable, "train.py", "task=lm", "model.bidirectional=true",
                           "task.data.source=files", "task.data.train_file=/nonexistent/train.txt"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "model.bidirectional=true" in proc.stderr + proc.stdout
    assert "not found" not in proc.stderr  # the data (a missing file here) was never touched


@pytest.mark.parametrize("cfg", [SRU_CFG, LSTM_CFG], ids=["sru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_all_layer_outputs_end_with_the_normal_output(cfg, bidirectional):
    torch.manual_seed(0)
    enc = build_encoder({**cfg, "bidirectional": bidirectional}, 4).eval()
    x = torch.randn(7, 3, 4)
    mask = torch.zeros(7, 3, dtype=torch.bool)
    mask[5:, 1] = True  # sequence 1 has 5 real steps
    out, state = enc(x, mask_pad=mask)
    outs, state_all = enc(x, mask_pad=mask, return_all_layers=True)
    assert len(outs) == 3 and all(o.shape == out.shape for o in outs)
    torch.testing.assert_close(outs[-1], out)
    if state is not None:  # the LSTM returns no final state for a padded batch (LSTMEncoder docstring)
        torch.testing.assert_close(state_all, state)
    assert outs[-1][5:, 1].abs().max() == 0  # padded steps produce no output


@pytest.mark.parametrize("cfg", [SRU_CFG, LSTM_CFG], ids=["sru", "lstm"])
def test_one_step_at_a_time_equals_the_full_sequence_and_reordering_picks_beams(cfg):
    torch.manual_seed(0)
    enc = build_encoder(cfg, 4).eval()
    x = torch.randn(6, 3, 4)
    full, final = enc(x)
    state, steps = None, []
    for t in range(6):
        h, state = enc.step(x[t], state)
        steps.append(h)
    torch.testing.assert_close(torch.stack(steps), full, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(state, final, rtol=1e-5, atol=1e-6)
    index = torch.tensor([2, 2, 0])
    picked = enc.reorder_state(state, index)
    h_next, _ = enc.step(x[0][index], picked)
    h_ref, _ = enc(torch.cat([x, x[:1]])[:, index])
    torch.testing.assert_close(h_next, h_ref[-1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="bidirectional"):
        build_encoder({**cfg, "bidirectional": True}, 4).step(x[0])


def test_lstm_loads_checkpoints_of_the_single_module_layout():
    torch.manual_seed(0)
    old = nn.LSTM(4, 6, num_layers=2, bidirectional=True)
    enc = build_encoder({**LSTM_CFG, "num_layers": 2, "bidirectional": True}, 4).eval()
    enc.load_state_dict({f"rnn.{k}": v for k, v in old.state_dict().items()})
    x = torch.randn(5, 2, 4)
    ref, (h, c) = old(x)
    out, (h2, c2) = enc(x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(h2, h)
    torch.testing.assert_close(c2, c)


@pytest.mark.parametrize("mode", ["reverse", "bucketed"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_lstm_unpacked_padding_equals_packing_with_gradients(mode, bidirectional, with_state):
    """The unpacked padding paths (each sequence's real part reversed for the backward direction; and
    that over length buckets, the CPU default) give the outputs and every gradient of
    pack_padded_sequence, in float64; "reverse" with dropout too (same masks: same RNG draws)."""
    torch.manual_seed(0)
    dropout = 0.3 if mode == "reverse" else 0.0  # buckets draw their dropout masks per bucket
    enc = build_encoder({**LSTM_CFG, "dropout": dropout, "bidirectional": bidirectional}, 4).double().train()
    enc.buckets = 2
    lengths = torch.tensor([9, 4, 1, 7, 9])
    mask = torch.arange(9).unsqueeze(1) >= lengths.unsqueeze(0)
    x = torch.randn(9, 5, 4, dtype=torch.float64)
    dirs = 2 if bidirectional else 1
    state = tuple(torch.randn(3 * dirs, 5, 6, dtype=torch.float64) for _ in range(2)) if with_state else None
    results = {}
    for name in ("packed", mode):
        enc.padding_mode = name
        enc.zero_grad()
        x_in = x.clone().requires_grad_(True)
        torch.manual_seed(1)  # the same dropout masks for both paths
        outs, _ = enc(x_in, state, mask_pad=mask, return_all_layers=True)
        weights = torch.randn_like(outs[-1], generator=torch.Generator().manual_seed(2))
        (sum(o.pow(2).sum() for o in outs[:-1]) + (outs[-1] * weights).sum()).backward()
        results[name] = (outs, x_in.grad, [p.grad.clone() for p in enc.parameters()])
    (out_p, gx_p, gw_p), (out_r, gx_r, gw_r) = results["packed"], results[mode]
    for a, b in zip(out_p, out_r):
        torch.testing.assert_close(b, a)
    torch.testing.assert_close(gx_r, gx_p)
    assert gx_r[mask].abs().max() == 0  # padded inputs get no gradient
    for a, b in zip(gw_p, gw_r):
        torch.testing.assert_close(b, a)


def test_lstm_padding_mode_is_checked():
    enc = build_encoder(LSTM_CFG, 4)
    enc.padding_mode = "sorted"
    with pytest.raises(ValueError, match="'bucketed', 'reverse' or 'packed'"):
        enc(torch.randn(3, 2, 4), mask_pad=torch.tensor([[0, 0], [0, 0], [0, 1]], dtype=torch.bool))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_keras_init_keeps_a_deep_stacks_signal(bidirectional):
    """model.init=keras: orthogonal recurrent gates, Glorot input weights, forget bias 1 (input-side bias only),
    and a 5 x 64 stack's last layer keeps ~2x the output scale of nn.LSTM's own init."""
    torch.manual_seed(0)
    x = torch.randn(200, 4, 40)
    scales = {}
    for init in ("torch", "keras"):
        torch.manual_seed(0)
        enc = build_encoder({**LSTM_CFG, "hidden_size": 64, "num_layers": 5, "bidirectional": bidirectional,
                             "init": init}, 40)
        with torch.no_grad():
            scales[init] = enc(x)[0].std().item()
    assert scales["keras"] > 1.5 * scales["torch"]
    layer, h = enc.layers[1], 64
    for suffix in ("", "_reverse") if bidirectional else ("",):
        w_hh = getattr(layer, f"weight_hh_l0{suffix}")
        for gate in range(4):
            block = w_hh[gate * h:(gate + 1) * h]
            torch.testing.assert_close(block @ block.T, torch.eye(h), atol=1e-5, rtol=0)
        bias = getattr(layer, f"bias_ih_l0{suffix}")
        assert bias[h:2 * h].eq(1).all() and bias[:h].eq(0).all() and getattr(layer, f"bias_hh_l0{suffix}").eq(0).all()
    with pytest.raises(ValueError, match=r"model.init: expected one of \[.torch., .keras.\]"):
        build_encoder({**LSTM_CFG, "init": "xavier"}, 4)
