"""sru.SRUpp against an independent pure-PyTorch SRU++ (tests/srupp_reference.py), in float64:
forward, every gradient, padding, memory, attention masks, bidirectional, attention every n /
last n layers; plus state_dict round trips, segment memory, argument errors, autocast and
torch.compile."""
import io
import pickle

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from sru import SRUpp, SRUppAttention, SRUppCell, SRUppProjectedLinear
from sru.ops import available_backends
from sru_helpers import BACKENDS, randomize
from srupp_reference import srupp_reference

L, B = 5, 3


def causal(length, mem_len=0):
    hidden = torch.ones(length, mem_len + length, dtype=torch.bool).triu(mem_len + 1)
    return torch.zeros(hidden.shape, dtype=torch.float64).masked_fill(hidden, float("-inf"))


def lengths_mask(lengths, length=L):
    return torch.arange(length).unsqueeze(1) >= torch.tensor(lengths).unsqueeze(0)


# name: (SRUpp kwargs with input_size, forward extras)
CONFIGS = {
    "heads2_padding": (dict(input_size=4, hidden_size=4, proj_size=4, num_heads=2), {"pad": True}),
    "k4_causal": (dict(input_size=6, hidden_size=4, proj_size=4), {"causal": True, "c0": True}),
    "bidirectional_padding": (dict(input_size=5, hidden_size=3, proj_size=4, bidirectional=True),
                              {"pad": True, "c0": True}),
    "memory_causal": (dict(input_size=4, hidden_size=4, proj_size=6, num_heads=3),
                      {"memory": 2, "causal": True, "pad": True, "memory_pad": True}),
    "every_2": (dict(input_size=4, hidden_size=4, proj_size=4, num_layers=3,
                     attention_every_n_layers=2), {"causal": True}),
    "last_2": (dict(input_size=4, hidden_size=4, proj_size=4, num_layers=3,
                    attention_last_n_layers=2), {"pad": True}),
    "pre_norm_memory": (dict(input_size=4, hidden_size=4, proj_size=4, layer_norm=True),
                        {"memory": 3, "causal": True}),
    "post_norm": (dict(input_size=4, hidden_size=4, proj_size=4, layer_norm=True,
                       normalize_after=True), {"pad": True}),
    "no_attn_norm_rescale_proj": (dict(input_size=7, hidden_size=4, proj_size=4, rescale=True,
                                       attn_layer_norm=False, proj_input_to_hidden_first=True),
                                  {"causal": True}),
}


def build(kwargs, backend="auto", seed=0):
    kwargs = dict(kwargs)
    model = SRUpp(kwargs.pop("input_size"), **kwargs, backend=backend).double().eval()
    randomize(model, seed=seed)
    for cell in model.rnn_lst:
        if cell.rescale:
            cell.scale_x.fill_(1.2)
            cell._scale_x_value = 1.2
    return model


def make_inputs(model, extras, seed=1):
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    inputs = {"input": rand(L, B, model.input_size).requires_grad_()}
    if extras.get("c0"):
        inputs["c0"] = rand(model.num_layers, B, model.output_size).requires_grad_()
    if extras.get("pad"):
        inputs["mask_pad"] = lengths_mask([L, L - 2, L - 1])
    mem = extras.get("memory", 0)
    if mem:
        widths = [cell.input_size for cell in model.rnn_lst]
        inputs["memory"] = [rand(mem, B, w).requires_grad_() for w in widths]
        if extras.get("memory_pad"):
            inputs["memory_mask_pad"] = lengths_mask([mem, mem - 1, mem], mem).flip(0)
    if extras.get("causal"):
        inputs["attn_mask"] = causal(L, mem)
    return inputs


def leaves(inputs):
    found = [v for v in inputs.values() if isinstance(v, torch.Tensor) and v.requires_grad]
    return found + [m for m in inputs.get("memory", [])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CONFIGS)
def test_matches_reference_forward_and_gradients(name, backend):
    kwargs, extras = CONFIGS[name]
    model = build(kwargs, backend)
    inputs = make_inputs(model, extras)
    h, c, state = model(**inputs)
    h_ref, c_ref = srupp_reference(model, **inputs)
    torch.testing.assert_close(h, h_ref, rtol=0, atol=1e-10)
    torch.testing.assert_close(c, c_ref, rtol=0, atol=1e-10)
    assert [t.shape[-1] for t in state["saved_inputs"]] == [cell.input_size for cell in model.rnn_lst]

    w_h, w_c = torch.randn_like(h), torch.randn_like(c)
    wrt = leaves(inputs) + [p for p in model.parameters()]
    got = torch.autograd.grad((h * w_h).sum() + (c * w_c).sum(), wrt, allow_unused=True)
    want = torch.autograd.grad((h_ref * w_h).sum() + (c_ref * w_c).sum(), wrt, allow_unused=True)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            torch.testing.assert_close(g, w, rtol=0, atol=1e-10)


def test_attention_layers_follow_every_n_and_last_n():
    kinds = lambda m: [type(c.transform_module) for c in m.rnn_lst]  # noqa: E731
    A, P = SRUppAttention, SRUppProjectedLinear
    assert kinds(SRUpp(4, 4, 4, num_layers=4, attention_every_n_layers=2)) == [P, A, P, A]
    assert kinds(SRUpp(4, 4, 4, num_layers=4, attention_last_n_layers=1)) == [P, P, P, A]
    assert kinds(SRUpp(4, 4, 4, num_layers=3)) == [A, A, A]


def test_segment_memory_equals_one_long_causal_forward():
    """Transformer-XL training: segment 2 with memory = segment 1's saved_inputs and c0 = its c
    computes what one causal pass over both segments computes for those positions."""
    model = build(dict(input_size=4, hidden_size=4, proj_size=4, num_layers=3, num_heads=2))
    x = torch.randn(2 * L, B, 4, dtype=torch.float64)
    h_all, c_all, _ = model(x, attn_mask=causal(2 * L))
    h1, c1, state1 = model(x[:L], attn_mask=causal(L))
    h2, c2, _ = model(x[L:], c0=c1, memory=state1["saved_inputs"], attn_mask=causal(L, L))
    torch.testing.assert_close(torch.cat([h1, h2]), h_all, rtol=0, atol=1e-12)
    torch.testing.assert_close(c2, c_all, rtol=0, atol=1e-12)


def test_packed_sequence_equals_mask_pad():
    model = build(CONFIGS["bidirectional_padding"][0])
    x = torch.randn(L, B, 5, dtype=torch.float64)
    lengths = torch.tensor([L, L - 2, L - 1])
    h_pad, c_pad, _ = model(x, mask_pad=lengths_mask(lengths.tolist()))
    packed, c_packed, _ = model(pack_padded_sequence(x, lengths, enforce_sorted=False))
    h_packed, _ = pad_packed_sequence(packed)
    torch.testing.assert_close(h_packed, h_pad, rtol=0, atol=1e-12)
    torch.testing.assert_close(c_packed, c_pad, rtol=0, atol=1e-12)


def test_nn_rnn_compatible_return_shape():
    model = SRUpp(4, 3, 4, num_layers=2, bidirectional=True, nn_rnn_compatible_return=True)
    h, c, _ = model(torch.randn(L, B, 4))
    assert h.shape == (L, B, 6) and c.shape == (4, B, 3)


def test_state_dict_round_trip_and_pickle():
    model = build(CONFIGS["no_attn_norm_rescale_proj"][0])
    x = torch.randn(L, B, 7, dtype=torch.float64)
    want = model(x, attn_mask=causal(L))[:2]
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh = SRUpp(7, 4, 4, rescale=True, attn_layer_norm=False,
                  proj_input_to_hidden_first=True).double().eval()
    fresh.load_state_dict(torch.load(buffer, weights_only=True), strict=True)
    assert fresh.rnn_lst[0]._scale_x_value == 1.2  # the checkpoint's alpha, not the init's
    for restored in (fresh, pickle.loads(pickle.dumps(model))):
        got = restored(x, attn_mask=causal(L))[:2]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_defaults_are_the_official_ones():
    model = SRUpp(8, 8, 4)
    cell = model.rnn_lst[0]
    assert model.num_layers == 2 and model.num_heads == 1 and not model.bidirectional
    assert torch.all(cell.bias[8:] == -2.0) and torch.all(cell.bias[:8] == 0)
    assert cell.transform_module.alpha.item() == 0.0  # ReZero start
    assert cell.transform_module.layer_norm is not None and cell.layer_norm is None
    assert cell.weight_c.abs().max() <= 1.0


@pytest.mark.parametrize("call, match", [
    (lambda m: m(torch.randn(L, B, 5)), r"input of shape \(length, batch, 4\)"),
    (lambda m: m(torch.randn(L, B, 4), c0=torch.zeros(1, B, 4)), "c0 of shape"),
    (lambda m: m(torch.randn(L, B, 4), mask_pad=torch.zeros(B, L)), "mask_pad of shape"),
    (lambda m: m(torch.randn(L, B, 4), attn_mask=torch.zeros(L, L + 1)), "attn_mask of shape"),
    (lambda m: m(torch.randn(L, B, 4), attn_mask=torch.ones(L, L, dtype=torch.bool)), "additive float"),
    (lambda m: m(torch.randn(L, B, 4), memory=[torch.zeros(2, B, 4)]), "list of 2 tensors"),
    (lambda m: m(torch.randn(L, B, 4), memory=[torch.zeros(2, B, 3)] * 2), "memory of shape"),
    (lambda m: m(torch.randint(0, 3, (L, B, 4))), "floating-point"),
])
def test_bad_arguments_raise_one_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call(SRUpp(4, 4, 4))


def test_constructor_errors():
    with pytest.raises(ValueError, match="at most one of attention_every_n_layers"):
        SRUpp(4, 4, 4, attention_every_n_layers=2, attention_last_n_layers=1)
    with pytest.raises(ValueError, match="num_heads"):
        SRUpp(4, 4, 6, num_heads=4)


def test_cell_alone_with_a_plain_linear_transform():
    cell = SRUppCell(4, 4, transform_module=None).double()  # the official plain layout
    assert sorted(cell.state_dict()) == ["bias", "scale_x", "transform_module.weight", "weight_c"]
    h, c = cell(torch.randn(L, B, 4, dtype=torch.float64))
    assert h.shape == (L, B, 4) and c.shape == (B, 4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_runs_the_recurrence_in_float32(dtype):
    torch.manual_seed(0)
    model = SRUpp(16, 16, 8, num_layers=2, num_heads=2, layer_norm=True)
    for cell in model.rnn_lst:
        cell.transform_module.alpha.data.fill_(0.5)
    x = torch.randn(L, B, 16)
    want, c_want, _ = model(x, attn_mask=causal(L).float())
    with torch.autocast("cpu", dtype=dtype):
        h, c, _ = model(x, attn_mask=causal(L).float())
    assert h.dtype == torch.float32 and c.dtype == torch.float32
    torch.testing.assert_close(h, want, rtol=0.05, atol=0.05)
    h.float().square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_module_keeps_c_in_float32(dtype):
    """As sru.SRU: a module in half precision returns h in its dtype and c in float32."""
    torch.manual_seed(0)
    model = SRUpp(16, 16, 8, num_heads=2, layer_norm=True)
    for cell in model.rnn_lst:
        cell.transform_module.alpha.data.fill_(0.5)
    x = torch.randn(L, B, 16)
    want, _, _ = model(x)
    half = SRUpp(16, 16, 8, num_heads=2, layer_norm=True).to(dtype)
    half.load_state_dict(model.state_dict())
    h, c, _ = half(x.to(dtype))
    assert h.dtype == dtype and c.dtype == torch.float32
    torch.testing.assert_close(h.float(), want, rtol=0.05, atol=0.05)
    h.float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in half.parameters())


def test_training_mode_dropout_changes_outputs_and_backpropagates():
    torch.manual_seed(0)
    model = SRUpp(8, 8, 4, num_layers=3, dropout=0.3, attn_dropout=0.3).train()
    x = torch.randn(L, B, 8)
    h1, _, _ = model(x)
    h2, _, _ = model(x)
    assert not torch.allclose(h1, h2)
    h1.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.slow
@pytest.mark.skipif("cpu" not in available_backends(), reason="the fused CPU kernel does not build")
def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    model = SRUpp(8, 8, 4, num_layers=2, num_heads=2, layer_norm=True).eval()
    for cell in model.rnn_lst:
        cell.transform_module.alpha.data.fill_(0.5)
    x = torch.randn(L, B, 8)
    mask_pad, attn_mask = lengths_mask([L, L - 1, L - 2]), causal(L).float()

    def run(fn):
        model.zero_grad()
        h, c, _ = fn(x, mask_pad=mask_pad, attn_mask=attn_mask)
        (h.square().sum() + c.sum()).backward()
        return [h, c] + [p.grad.clone() for p in model.parameters()]

    eager = run(model)
    torch._dynamo.reset()
    compiled = run(torch.compile(model, fullgraph=True))
    for want, got in zip(eager, compiled):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (Triton recurrence)")
def test_cuda_triton_path_matches_cpu_float64():
    model = build(CONFIGS["memory_causal"][0])
    inputs = make_inputs(model, CONFIGS["memory_causal"][1])
    h_want, c_want, _ = model(**inputs)
    gpu = build(CONFIGS["memory_causal"][0]).float().cuda()
    moved = {k: ([m.detach().float().cuda() for m in v] if isinstance(v, list) else
                 v.detach().cuda().to(torch.float32 if v.is_floating_point() else v.dtype))
             for k, v in inputs.items()}
    h, c, _ = gpu(**moved)
    torch.testing.assert_close(h.double().cpu(), h_want.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(c.double().cpu(), c_want.detach(), rtol=1e-4, atol=1e-4)
    h.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in gpu.parameters())
