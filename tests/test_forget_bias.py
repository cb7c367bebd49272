"""model.forget_bias: the SRU encoder's initial forget-gate bias, a departure that leaves `sru/` official."""
import pytest
import torch
from test_official_checkpoint import CONFIGS, official_state_dict  # noqa: E402  (tests/ is on sys.path)

from tasks.common.rnn_encoders import SRUEncoder


def _encoder(forget_bias, **kw):
    torch.manual_seed(0)
    args = dict(input_size=7, hidden_size=4, num_layers=3, bidirectional=True, highway_bias=-1.5)
    args.update(kw)
    return SRUEncoder(forget_bias=forget_bias, **args)


def test_sets_exactly_the_forget_half_of_every_layer_bias():
    base, shifted = _encoder(0.0), _encoder(2.0)
    for cell0, cell in zip(base.rnn.rnn_lst, shifted.rnn.rnn_lst):
        out = cell.output_size  # dirs * hidden = 8; bias = [b_f (8) ; b_r (8)]
        assert cell.bias.shape == (2 * out,)
        assert torch.equal(cell.bias[:out], torch.full((out,), 2.0))
        assert torch.equal(cell.bias[out:], torch.full((out,), -1.5))  # highway (reset) bias untouched
        assert torch.equal(cell0.bias[:out], torch.zeros(out))          # default = official b_f = 0
    # every other parameter is the official initialisation, bit for bit
    p0, p = dict(base.named_parameters()), dict(shifted.named_parameters())
    assert p0.keys() == p.keys()
    for name in p0:
        if not name.endswith(".bias"):
            assert torch.equal(p0[name], p[name]), name


def test_forget_bias_changes_the_computed_function():
    x = torch.randn(5, 2, 7)
    out0, _ = _encoder(0.0)(x)
    out2, _ = _encoder(2.0)(x)
    assert not torch.allclose(out0, out2)


@pytest.mark.parametrize("name", ["bi_proj_preln_rescale", "uni_postln_tanh"])
def test_official_layout_checkpoints_load_unchanged(name):
    cfg, input_size = CONFIGS[name]
    enc = SRUEncoder(input_size=input_size, forget_bias=3.0, **cfg).double()
    state = official_state_dict(cfg, input_size)
    enc.rnn.load_state_dict(state, strict=True)  # same keys and shapes: no extra parameter or buffer
    loaded = enc.rnn.state_dict()
    assert loaded.keys() == state.keys()
    for key in state:  # the checkpoint's biases win: forget_bias is an initialisation only
        assert torch.equal(loaded[key], state[key]), key


def test_model_config_default_is_the_official_init():
    from conftest import compose
    cfg = compose(["task=classification", "model=sru"])
    assert cfg.model.forget_bias == 0.0
    assert compose(["experiment=paper/classification_mr_sru"]).model.forget_bias == 0.0
