"""Beam search through the layer's row pass (sru/ops/cpu/decoding.py ``beam_rows``, whose own tests are in
tests/test_ops_decoding.py) ranks and scores as the log_softmax route did."""
from __future__ import annotations

import pytest
import torch
from test_translation_model import BOS, EOS, PAD, source_batch, tiny_model

import tasks.translation.search as search

NEG_INF = float("-inf")


def via_log_softmax(logits, banned, run):
    """The route before the row pass: log p written out, masked, run maxima left to best_continuations."""
    logits.copy_(torch.log_softmax(logits, -1))
    logits[:, list(banned)] = NEG_INF
    return torch.zeros(logits.size(0)), None


@pytest.mark.parametrize("forced_early", [False, True])
def test_beam_search_through_the_row_pass_ranks_as_log_softmax(monkeypatch, forced_early):
    """A vocabulary of 320 (ten runs of 32 per hypothesis: more runs than the 8 continuations kept, so a stale
    run maximum would pick the wrong runs): the same n-best hypotheses and scores as ranking log_softmax's
    output; ``forced_early`` makes every sentence's last allowed step come soon (forced </s> rows)."""
    model = tiny_model("transformer_sru", "pre", "before_ffn", seed=5, vocab=320)
    src, src_pad = source_batch(3)
    limits = dict(max_len_a=0.0, max_len_b=3) if forced_early else dict(max_len_a=1.0, max_len_b=4)
    run = lambda: search.beam_search(model, src, src_pad, BOS, EOS, PAD, beam_size=4, nbest=4, **limits)  # noqa: E731
    got = run()
    monkeypatch.setattr(search.cpu_decoding, "beam_rows", via_log_softmax)
    want = run()
    assert [[ids for _, ids in sentence] for sentence in got] == [[ids for _, ids in sentence] for sentence in want]
    for mine, theirs in zip(got, want):
        torch.testing.assert_close(torch.tensor([s for s, _ in mine]), torch.tensor([s for s, _ in theirs]),
                                   atol=1e-5, rtol=0)
