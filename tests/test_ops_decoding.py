"""The layer's decoding kernels (sru/ops/cpu/decoding.py). Beam search's row pass: the C pass and its torch twin
give log_softmax's normalisation, the banned tokens masked and exact run maxima. Few-query attention: equal to
torch's scaled_dot_product_attention over the shapes and strides decoding gives it, and used only where it applies.
(A decoder searching through both: tests/test_translation_beam_rows.py, test_translation_decode_attention.py.)"""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from sru.ops.cpu.decoding import attend, attention_kernel, beam_rows, library, torch_rows

NEG_INF = float("-inf")


def compiled_rows(logits, banned, run):
    if os.environ.get("SRU_CPU_EXTENSION") == "0":
        pytest.skip("SRU_CPU_EXTENSION=0: the C pass is turned off")
    assert library() is not None, "beam_rows.cpp did not build (the SRU kernel's compiler and ninja are needed)"
    return beam_rows(logits, banned, run)


@pytest.mark.parametrize("rows_of", [compiled_rows, torch_rows], ids=["C", "torch"])
@pytest.mark.parametrize("N,V,run", [(7, 4000, 32), (3, 64, 32), (5, 96, 16), (1, 32, 32)])
def test_rows_give_log_softmax_banned_tokens_and_run_maxima(rows_of, N, V, run):
    g = torch.Generator().manual_seed(N * V + run)
    logits = torch.randn(N, V, generator=g) * 4
    logits[0, 5] = 100.0  # one word far ahead: exp(100) overflows float32, the partition must not
    want_lp = torch.log_softmax(logits, -1)
    banned = (0, 2)
    got = logits.clone()
    log_partition, run_max = rows_of(got, banned, run)
    torch.testing.assert_close(got[:, 3:] - log_partition[:, None], want_lp[:, 3:], atol=2e-5, rtol=0)
    assert torch.isneginf(got[:, list(banned)]).all() and torch.equal(got[:, [1, 3]], logits[:, [1, 3]])
    assert torch.equal(run_max, got.view(N, V // run, run).amax(-1))  # exact: the bound must not be loose


def test_rows_when_no_run_length_divides_the_vocabulary():
    logits = torch.randn(4, 37)
    log_partition, run_max = beam_rows(logits.clone(), (0,), 32)
    assert run_max is None
    torch.testing.assert_close(log_partition, torch.logsumexp(logits, -1))



needs_kernel = pytest.mark.skipif(attention_kernel() is None, reason="decode_attention.cpp needs a build with AVX-512")


def additive(shape, g, share=0.3):
    mask = torch.zeros(shape).masked_fill_(torch.rand(shape, generator=g) < share, float("-inf"))
    mask[..., 0] = 0.0  # every query may read one key at least (a fully masked one is another contract)
    return mask


@needs_kernel
@pytest.mark.parametrize("D", [16, 32, 64, 128])
@pytest.mark.parametrize("Q,W", [(1, 1), (1, 40), (6, 17), (5, 16), (7, 40), (13, 33)])
@pytest.mark.parametrize("layout", ["buffer", "encoder", "contiguous"])
@pytest.mark.parametrize("mask_kind", ["none", "per_query", "per_key"])
def test_kernel_equals_torch_attention(D, Q, W, layout, mask_kind):
    """``buffer``: keys as a view of a buffer with room to grow (append_keys); ``encoder``: the projected encoder
    output, time-major, seen as (sentences, heads, positions, D) (with one query and no mask: the kernel's
    row-at-once pass, SRU++'s cache); masks per query (beam search's hypotheses) or one per key row broadcast
    over the queries (the encoder side's padding)."""
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
