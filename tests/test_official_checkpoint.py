"""Checkpoints in the official ``sru`` 2.x layout load unchanged and compute the same function.

Each test builds a state_dict by hand from the documented layout (random values, nothing
downloaded), loads it with ``strict=True`` and compares outputs and gradients in float64
against a plain re-implementation of the official forward written here from the paper's
equations. That re-implementation shares no code with ``sru``.
"""
import io

import pytest
import torch
import torch.nn.functional as F

from sru import SRU

# name, constructor arguments (official names), input size
CONFIGS = {
    # bidirectional, k = 4 first layer, factorized weights, pre layer norm, rescale
    "bi_proj_preln_rescale": (dict(hidden_size=4, num_layers=3, bidirectional=True,
                                   projection_size=3, layer_norm=True, rescale=True), 7),
    # unidirectional, k = 3 everywhere, post layer norm, tanh
    "uni_postln_tanh": (dict(hidden_size=5, num_layers=2, layer_norm=True, normalize_after=True,
                             use_tanh=True), 5),
    # input projected to the hidden width first, no skip term
    "input_to_hidden_noskip": (dict(hidden_size=3, num_layers=2, bidirectional=True,
                                    has_skip_term=False, proj_input_to_hidden_first=True), 4),
    # the paper's first version: weight_c stored, zero and frozen
    "v1_rescale": (dict(hidden_size=6, num_layers=2, v1=True, rescale=True), 6),
}


def official_state_dict(cfg, input_size, seed=0):
    """A random state_dict with exactly the official 2.x keys and shapes."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.5

    d = cfg["hidden_size"]
    dirs = 2 if cfg.get("bidirectional") else 1
    out = dirs * d
    state = {}
    first_in = input_size
    if cfg.get("proj_input_to_hidden_first") and input_size != out:
        state["input_to_hidden.weight"] = rand(out, input_size)  # nn.Linear, no bias
        first_in = out
    for i in range(cfg["num_layers"]):
        d_in = first_in if i == 0 else out
        k = 4 if cfg.get("has_skip_term", True) and d_in != out else 3
        p = cfg.get("projection_size", 0)
        key = f"rnn_lst.{i}."
        if 0 < p < d_in and p < out:
            state[key + "weight_proj"] = rand(d_in, p)
            state[key + "weight"] = rand(p, out * k)
        else:
            state[key + "weight"] = rand(d_in, out * k)
        state[key + "weight_c"] = torch.zeros(2 * out, dtype=torch.float64) if cfg.get("v1") \
            else rand(2 * out)
        state[key + "bias"] = rand(2 * out)
        # any stored value: a checkpoint's scale_x is what the official forward multiplies by
        state[key + "scale_x"] = torch.tensor([1.0 + torch.rand(1, generator=gen).item()],
                                              dtype=torch.float64)
        if cfg.get("layer_norm"):
            width = out if cfg.get("normalize_after") else d_in
            state[key + "layer_norm.weight"] = 1 + rand(width)
            state[key + "layer_norm.bias"] = rand(width)
    return state


def official_forward(state, cfg, x, c0, mask_pad):
    """The official forward, written out from the paper equations (time-major input)."""
    d = cfg["hidden_size"]
    dirs = 2 if cfg.get("bidirectional") else 1
    length, batch = x.shape[:2]
    if "input_to_hidden.weight" in state:
        x = x @ state["input_to_hidden.weight"].t()
    c_last_layers = []
    for i in range(cfg["num_layers"]):
        key = f"rnn_lst.{i}."
        residual = x
        ln = cfg.get("layer_norm")
        if ln and not cfg.get("normalize_after"):
            x = F.layer_norm(x, x.shape[-1:], state[key + "layer_norm.weight"],
                             state[key + "layer_norm.bias"])
        weight = state[key + "weight"]
        if key + "weight_proj" in state:
            weight = state[key + "weight_proj"] @ weight
        k = weight.shape[1] // (dirs * d)
        u = (x @ weight).view(length, batch, dirs, d, k)
        v_f, v_r = state[key + "weight_c"].view(2, dirs, d)
        b_f, b_r = state[key + "bias"].view(2, dirs, d)
        scale = state[key + "scale_x"] if cfg.get("rescale") else 1.0
        h = []
        c_last = []
        for di in range(dirs):
            c = c0[i].view(batch, dirs, d)[:, di]
            h_dir = [None] * length
            for t in (range(length) if di == 0 else reversed(range(length))):
                real = ~mask_pad[t].unsqueeze(1)
                f = torch.sigmoid(u[t, :, di, :, 1] + v_f[di] * c + b_f[di])
                r = torch.sigmoid(u[t, :, di, :, 2] + v_r[di] * c + b_r[di])
                c = torch.where(real, f * c + (1 - f) * u[t, :, di, :, 0], c)
                g = torch.tanh(c) if cfg.get("use_tanh") else c
                if not cfg.get("has_skip_term", True):
                    skip = torch.zeros_like(g)
                elif k == 4:
                    skip = u[t, :, di, :, 3]
                else:
                    skip = scale * residual[t].view(batch, dirs, d)[:, di]
                h_dir[t] = torch.where(real, r * g + (1 - r) * skip, torch.zeros_like(g))
            h.append(torch.stack(h_dir))
            c_last.append(c)
        x = torch.cat(h, dim=-1)
        if ln and cfg.get("normalize_after"):
            x = F.layer_norm(x, x.shape[-1:], state[key + "layer_norm.weight"],
                             state[key + "layer_norm.bias"])
        c_last_layers.append(torch.cat(c_last, dim=-1))
    return x, torch.stack(c_last_layers)


def _inputs(cfg, input_size, seed=1):
    gen = torch.Generator().manual_seed(seed)
    length, batch = 6, 3
    out = cfg["hidden_size"] * (2 if cfg.get("bidirectional") else 1)
    x = torch.randn(length, batch, input_size, generator=gen, dtype=torch.float64)
    c0 = torch.randn(cfg["num_layers"], batch, out, generator=gen, dtype=torch.float64)
    mask_pad = torch.arange(length).unsqueeze(1) >= torch.tensor([6, 4, 2]).unsqueeze(0)
    grads = (torch.randn(length, batch, out, generator=gen, dtype=torch.float64),
             torch.randn(cfg["num_layers"], batch, out, generator=gen, dtype=torch.float64))
    return x, c0, mask_pad, grads


def _run(fn, params, x, c0, mask_pad, grads):
    """Outputs and gradients w.r.t. the input, c0 and each named parameter."""
    x = x.clone().requires_grad_()
    c0 = c0.clone().requires_grad_()
    h, c = fn(x, c0, mask_pad)
    names = sorted(params)
    loss = (h * grads[0]).sum() + (c * grads[1]).sum()
    found = torch.autograd.grad(loss, [x, c0] + [params[n] for n in names], allow_unused=True)
    return {"h": h, "c": c, "x.grad": found[0], "c0.grad": found[1],
            **{n + ".grad": g for n, g in zip(names, found[2:])}}


@pytest.mark.parametrize("backend", ["reference", "auto"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_official_layout_loads_strict_and_matches(name, backend):
    cfg, input_size = CONFIGS[name]
    state = official_state_dict(cfg, input_size)
    model = SRU(input_size, backend=backend, **cfg).double().eval()
    model.load_state_dict(state, strict=True)

    x, c0, mask_pad, grads = _inputs(cfg, input_size)
    expected_params = {n: t.clone().requires_grad_() for n, t in state.items()
                       if not n.endswith("scale_x") and not (cfg.get("v1") and "weight_c" in n)}
    expected = _run(lambda x, c0, m: official_forward({**state, **expected_params}, cfg, x, c0, m),
                    expected_params, x, c0, mask_pad, grads)
    ours_params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert set(ours_params) == set(expected_params)
    got = _run(lambda x, c0, m: model(x, c0, mask_pad=m), ours_params, x, c0, mask_pad, grads)

    assert set(got) == set(expected)
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-7, atol=1e-7, msg=key)


def test_layout_mismatch_is_reported_by_strict_loading():
    cfg, input_size = CONFIGS["bi_proj_preln_rescale"]
    state = official_state_dict(cfg, input_size)
    model = SRU(input_size, **{**cfg, "projection_size": 0}).double()
    with pytest.raises(RuntimeError, match="weight_proj"):
        model.load_state_dict(state, strict=True)


def test_saved_checkpoint_round_trips(tmp_path):
    cfg, input_size = CONFIGS["bi_proj_preln_rescale"]
    model = SRU(input_size, **cfg).double().eval()
    model.load_state_dict(official_state_dict(cfg, input_size, seed=3))
    x, c0, mask_pad, _ = _inputs(cfg, input_size)
    h, c = model(x, c0, mask_pad=mask_pad)

    path = tmp_path / "sru.pt"
    torch.save(model.state_dict(), path)
    state = torch.load(path, weights_only=True)
    assert set(state) == set(official_state_dict(cfg, input_size))
    restored = SRU(input_size, **cfg).double().eval()  # fresh init, then overwritten
    restored.load_state_dict(state, strict=True)
    h2, c2 = restored(x, c0, mask_pad=mask_pad)
    assert torch.equal(h, h2) and torch.equal(c, c2)

    buffer = io.BytesIO()  # a whole pickled module (how older sru users saved models)
    torch.save(model, buffer)
    buffer.seek(0)
    whole = torch.load(buffer, weights_only=False)
    h3, c3 = whole(x, c0, mask_pad=mask_pad)
    assert torch.equal(h, h3) and torch.equal(c, c3)


def test_module_pickled_by_the_official_package_unpickles():
    # Official 2.x pickles name the same class paths (sru.modules.SRU/SRUCell) but lack the
    # attributes this package adds; strip them to get the official object state.
    cfg, input_size = CONFIGS["bi_proj_preln_rescale"]
    model = SRU(input_size, **cfg).double().eval()
    model.load_state_dict(official_state_dict(cfg, input_size, seed=4))
    x, c0, mask_pad, _ = _inputs(cfg, input_size)
    h, c = model(x, c0, mask_pad=mask_pad)
    del model.__dict__["batch_first"]
    for cell in model.rnn_lst:
        for name in ("_backend", "_gemm", "_scale_x_value", "normalize_after", "weight_c_init"):
            del cell.__dict__[name]
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    restored = torch.load(buffer, weights_only=False)
    h2, c2 = restored(x, c0, mask_pad=mask_pad)
    assert torch.equal(h, h2) and torch.equal(c, c2)
