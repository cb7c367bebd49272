"""Decoding's attention kernel (tasks/translation/decode_attention.py): equal to torch's
scaled_dot_product_attention over the shapes and strides decoding gives it, used only where it applies, and
beam search through it finds what it found through torch's kernel."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_translation_model import BOS, EOS, PAD, source_batch, tiny_model

import tasks.translation.model as model_module
from tasks.translation.decode_attention import attend, kernel
from tasks.translation.search import beam_search

needs_kernel = pytest.mark.skipif(kernel() is None, reason="decode_attention.cpp needs a build with AVX-512")


def additive(shape, g, share=0.3):
    mask = torch.zeros(shape).masked_fill_(torch.rand(shape, generator=g) < share, float("-inf"))
    mask[..., 0] = 0.0  # every query may read one key at least (a fully masked one is another contract)
    return mask


@needs_kernel
@pytest.mark.parametrize("D", [16, 32, 64, 128])
@pytest.mark.parametrize("Q,W", [(1, 1), (6, 17), (5, 16), (7, 40), (13, 33)])
@pytest.mark.parametrize("layout", ["buffer", "encoder", "contiguous"])
@pytest.mark.parametrize("mask_kind", ["none", "per_query", "per_key"])
def test_kernel_equals_torch_attention(D, Q, W, layout, mask_kind):
    """``buffer``: keys as a view of a buffer with room to grow (append_keys); ``encoder``: the projected encoder
    output, time-major, seen as (sentences, heads, positions, D); masks per query (beam search's hypotheses)
    or one per key row broadcast over the queries (the encoder side's padding)."""
    g = torch.Generator().manual_seed(D * 1000 + Q * 50 + W)
    G, H = 3, 2
    if layout == "buffer":
        k, v = (torch.randn(G, H, 2 * W + 3, D, generator=g)[:, :, :W] for _ in range(2))
    elif layout == "encoder":
        k, v = (torch.randn(W, G, H, D, generator=g).permute(1, 2, 0, 3) for _ in range(2))
    else:
        k, v = (torch.randn(G, H, W, D, generator=g) for _ in range(2))
    q = torch.randn(G, Q, H, D, generator=g).transpose(1, 2)  # grouped queries: not contiguous over heads
    mask = {"none": None, "per_query": additive((G, 1, Q, W), g), "per_key": additive((G, 1, 1, W), g)}[mask_kind]
    with torch.no_grad():
        got = attend(q, k, v, mask)
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert got is not None
    torch.testing.assert_close(got, want, atol=2e-6, rtol=2e-5)


@needs_kernel
def test_a_query_that_may_read_nothing_gets_zeros():
    q, k, v = torch.randn(1, 1, 2, 16), torch.randn(1, 1, 3, 16), torch.randn(1, 1, 3, 16)
    mask = torch.zeros(1, 1, 2, 3)
    mask[0, 0, 1] = float("-inf")
    with torch.no_grad():
        out = attend(q, k, v, mask)
    assert torch.equal(out[0, 0, 1], torch.zeros(16))
    torch.testing.assert_close(out[0, 0, 0], F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[0, 0, 0])


def test_torch_kernel_keeps_what_the_c_kernel_does_not_take():
    q, k, v = torch.randn(2, 2, 3, 16), torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16)
    assert attend(q, k, v) is None  # autograd on: training and gradients go through torch's kernel
    with torch.no_grad():
        assert attend(q.bfloat16(), k.bfloat16(), v.bfloat16()) is None  # bf16 (autocast) keeps torch's
        assert attend(q, k, v, torch.ones(2, 1, 3, 5, dtype=torch.bool)) is None  # boolean masks (the encoder)
        assert attend(torch.randn(2, 2, 3, 24), torch.randn(2, 2, 5, 24), torch.randn(2, 2, 5, 24)) is None
        assert attend(q, k.transpose(-1, -2).contiguous().transpose(-1, -2), v) is None  # head dim not contiguous
        assert attend(q, k[:1], v[:1]) is None  # keys broadcast over the sentences: torch's


@needs_kernel
def test_beam_search_through_the_kernel_finds_what_torch_attention_finds(monkeypatch):
    """A model whose heads the kernel takes (d_model 64, 2 heads of 32): the same n-best as with torch's kernel
    (the per-hypothesis decoding state, keys dropped and sentences leaving all run through it)."""
    model = tiny_model("transformer_sru", "pre", "before_ffn", seed=7, d_model=64, heads=2)
    src, src_pad = source_batch(4)
    calls = []
    counted = lambda *args: calls.append(1) or attend(*args)  # noqa: E731
    monkeypatch.setattr(model_module, "attend", counted)
    run = lambda: beam_search(model, src, src_pad, BOS, EOS, PAD, beam_size=5, nbest=5,  # noqa: E731
                              max_len_a=1.0, max_len_b=4)
    got = run()
    assert calls, "the decoder's attention did not reach the kernel"
    monkeypatch.setattr(model_module, "attend", lambda *args: None)
    want = run()
    assert [[ids for _, ids in s] for s in got] == [[ids for _, ids in s] for s in want]
    for mine, theirs in zip(got, want):
        torch.testing.assert_close(torch.tensor([s for s, _ in mine]), torch.tensor([s for s, _ in theirs]),
                                   atol=1e-5, rtol=0)
