"""SRU++'s one-call decoding step (sru.srupp_decoding.one_call, sru/ops/cpu/srupp_step.cpp) against the reference:
the full causal forward and the reference step (torch ops), token by token, over shapes, layer norms, layers without
attention, input_to_hidden, B = 1, B <= 8 (the C loop's products) and B > 8 (the BLAS), windows and forks."""
import copy
import pickle

import pytest
import torch
from torch import nn

from sru import SRUpp
from sru.srupp_decoding import one_call
from sru.ops.backends import cpu_decoding, load_library

pytestmark = pytest.mark.skipif(load_library() is None or cpu_decoding.attention_kernel() is None,
                                reason="the one-call step needs the CPU kernels built with AVX-512")

TOL = dict(rtol=5e-5, atol=5e-5)  # float32: products, layer norms and softmax summed in another order

CONFIGS = {
    "plain_one_head": dict(num_layers=2),
    "two_heads_pre_norm": dict(num_layers=2, num_heads=2, layer_norm=True),
    "post_norm_k4_input_to_hidden": dict(num_layers=2, num_heads=4, layer_norm=True, normalize_after=True,
                                         proj_input_to_hidden_first=True, rescale=True),
    "attention_every_2": dict(num_layers=3, attention_every_n_layers=2),
    "no_attention_layer_norm": dict(num_layers=2, attention_last_n_layers=0, layer_norm=True),
    "no_attention_norm": dict(num_layers=2, attn_layer_norm=False),
    "attention_pre_norm": dict(num_layers=2, num_heads=2),  # the attentions' normalize_after=False (build)
}


def build(name, input_size=24, hidden=32, proj=64, seed=0):
    torch.manual_seed(seed)
    model = SRUpp(input_size, hidden, proj, **CONFIGS[name]).eval()
    if name == "attention_pre_norm":  # keys and values from the normed z, the residual z as it was
        for cell in model.rnn_lst:
            cell.transform_module.normalize_after = False
    with torch.no_grad():  # away from the initialisation (alpha 0, zero biases): every term counts
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return model


def causal(length):
    hidden = torch.ones(length, length, dtype=torch.bool).triu(1)
    return torch.zeros(length, length).masked_fill(hidden, float("-inf"))


def steps(model, x, cache=None, max_context=None):
    outs = []
    for t in range(x.size(0)):
        h, cache = model.decode(x[t], cache, max_context=max_context)
        outs.append(h)
    return torch.stack(outs), cache


def fused_ran(model) -> bool:
    plan = model.__dict__.get(one_call.PLAN)
    return plan is not None and plan.usable


@pytest.mark.parametrize("batch", [1, 3, 12])
@pytest.mark.parametrize("name", CONFIGS)
def test_token_by_token_equals_the_full_forward_and_the_reference_step(name, batch):
    model = build(name)
    x = torch.randn(9, batch, 24)
    with torch.no_grad():
        want, c_want, _ = model(x, attn_mask=causal(9))
    got, cache = steps(model, x)
    assert fused_ran(model)
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(cache.c, c_want, **TOL)
    reference = copy.deepcopy(model).double()  # float64: the reference step, with its own keys and values
    ref_out, ref_cache = steps(reference, x.double())
    torch.testing.assert_close(got.double(), ref_out, **TOL)
    assert cache.length == ref_cache.length == (0 if name == "no_attention_layer_norm" else 9)
    for k, ref_k in zip(cache.keys, ref_cache.keys):
        assert (k is None) == (ref_k is None)
        if k is not None:
            torch.testing.assert_close(k.double(), ref_k, **TOL)


def test_a_prefill_chunk_then_fused_steps_with_a_window_and_forks():
    """A chunk runs the reference step, the single positions after it the fused one, over the chunk's cache; a
    sliding window; a cache decoded from twice (two beams) leaves the first branch intact; select()."""
    model = build("two_heads_pre_norm")
    x = torch.randn(30, 2, 24)
    steps_ = torch.arange(30)
    hidden = (steps_[None, :] > steps_[:, None]) | (steps_[None, :] < steps_[:, None] - 5)
    band = torch.zeros(30, 30).masked_fill(hidden, float("-inf"))
    with torch.no_grad():
        want, _, _ = model(x, attn_mask=band)
    h_prompt, cache = model.decode(x[:4], max_context=5)
    h_rest, cache = steps(model, x[4:], cache, max_context=5)
    assert fused_ran(model) and cache.length == 5
    torch.testing.assert_close(torch.cat([h_prompt, h_rest]), want, **TOL)
    h_a, branch_a = model.decode(x[0], cache)  # appends in place
    h_b, branch_b = model.decode(x[1], cache)  # the frontier moved: copies
    fresh = type(cache)([k.clone() for k in cache.keys], [v.clone() for v in cache.values], cache.c.clone())
    torch.testing.assert_close(h_b, model.decode(x[1], fresh)[0], rtol=0, atol=0)
    h_a2, _ = model.decode(x[2], branch_a)
    fresh_a = type(cache)([k.clone() for k in branch_a.keys], [v.clone() for v in branch_a.values],
                          branch_a.c.clone())
    torch.testing.assert_close(h_a2, model.decode(x[2], fresh_a)[0], rtol=0, atol=0)
    h_one, _ = model.decode(x[3, 1:], branch_b.select(torch.tensor([1])))
    torch.testing.assert_close(h_one, model.decode(x[3], branch_b)[0][1:], rtol=0, atol=0)


def test_the_plan_is_made_once_and_follows_the_modules():
    model = build("plain_one_head")
    x = torch.randn(6, 2, 24)
    steps(model, x[:2])
    plan = model.__dict__[one_call.PLAN]
    steps(model, x[2:4])
    assert model.__dict__[one_call.PLAN] is plan  # checked per call, not rebuilt
    attention = model.rnn_lst[0].transform_module
    attention.linear1.weight = nn.Parameter(torch.randn_like(attention.linear1.weight))  # a new tensor
    model.rnn_lst[1].set_scale_x(0.5)  # an option the C layers copied
    with torch.no_grad():
        attention.alpha.fill_(0.7)  # in place: read through its address
        want, _, _ = model(x, attn_mask=causal(6))
    got, _ = steps(model, x)
    assert model.__dict__[one_call.PLAN] is not plan and fused_ran(model)
    torch.testing.assert_close(got, want, **TOL)
    changes = [lambda: setattr(model.rnn_lst[1].transform_module, "layer_norm", nn.LayerNorm(64)),  # a module
               lambda: setattr(attention.linear3.weight, "data", attention.linear3.weight.data * 0.5)]  # a storage
    for change in changes:
        plan = model.__dict__[one_call.PLAN]
        change()
        with torch.no_grad():
            nn.init.normal_(model.rnn_lst[1].transform_module.layer_norm.weight)
            want, _, _ = model(x, attn_mask=causal(6))
        got, _ = steps(model, x)
        assert model.__dict__[one_call.PLAN] is not plan and fused_ran(model)
        torch.testing.assert_close(got, want, **TOL)
    clone = pickle.loads(pickle.dumps(model))  # the plan (raw pointers) is not pickled
    assert one_call.PLAN not in clone.__dict__
    torch.testing.assert_close(steps(clone, x)[0], got, rtol=0, atol=0)


def test_what_the_fused_step_does_not_take_runs_the_reference_step():
    x = torch.randn(5, 2, 24)
    odd_head = SRUpp(24, 32, 24, num_layers=2, num_heads=3).eval()  # head size 8: not a kernel size
    onednn = SRUpp(24, 32, 64, num_layers=2, gemm="onednn").eval()
    for model in (odd_head, onednn):
        with torch.no_grad():
            want, _, _ = model(x, attn_mask=causal(5))
        got, _ = steps(model, x)
        assert not fused_ran(model)
        torch.testing.assert_close(got, want, **TOL)
    model = build("plain_one_head")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model.decode(x[0])
    assert one_call.PLAN not in model.__dict__  # autocast: not even a plan
    model.double().decode(x[0].double())
    assert one_call.PLAN not in model.__dict__


def test_a_cache_of_other_sizes_is_refused_as_the_reference_step_refuses_it():
    """The C step never reads a cache whose keys or c do not have the model's sizes (it would read past them)."""
    model = build("plain_one_head")
    x = torch.randn(3, 24)
    _, cache = model.decode(x)
    wrong_keys = type(cache)([k[:, :2] for k in cache.keys], [v[:, :2] for v in cache.values], cache.c)
    with pytest.raises(RuntimeError):
        model.decode(x, wrong_keys)
    wrong_c = type(cache)(cache.keys, cache.values, cache.c[:1])
    with pytest.raises(IndexError):
        model.decode(x, wrong_c)
