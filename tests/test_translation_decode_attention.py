"""Beam search through the layer's decoding attention (sru/ops/cpu/decoding.py ``attend``, whose own tests are in
tests/test_ops_decoding.py) finds what it found through torch's kernel."""
from __future__ import annotations

import pytest
import torch
from test_translation_model import BOS, EOS, PAD, source_batch, tiny_model

from sru.ops.cpu import decoding
from tasks.translation.search import beam_search

needs_kernel = pytest.mark.skipif(decoding.attention_kernel() is None,
                                  reason="decode_attention.cpp needs a build with AVX-512")


@needs_kernel
def test_beam_search_through_the_kernel_finds_what_torch_attention_finds(monkeypatch):
    """A model whose heads the kernel takes (d_model 64, 2 heads of 32): the same n-best as with torch's kernel
    (the per-hypothesis decoding state, keys dropped and sentences leaving all run through it)."""
    model = tiny_model("transformer_sru", "pre", "before_ffn", seed=7, d_model=64, heads=2)
    src, src_pad = source_batch(4)
    calls = []
    attend = decoding.attend
    counted = lambda *args: calls.append(1) or attend(*args)  # noqa: E731
    monkeypatch.setattr(decoding, "attend", counted)
    run = lambda: beam_search(model, src, src_pad, BOS, EOS, PAD, beam_size=5, nbest=5,  # noqa: E731
                              max_len_a=1.0, max_len_b=4)
    got = run()
    assert calls, "the decoder's attention did not reach the kernel"
    monkeypatch.setattr(decoding, "attend", lambda *args: None)
    want = run()
    assert [[ids for _, ids in s] for s in got] == [[ids for _, ids in s] for s in want]
    for mine, theirs in zip(got, want):
        torch.testing.assert_close(torch.tensor([s for s, _ in mine]), torch.tensor([s for s, _ in theirs]),
                                   atol=1e-5, rtol=0)
