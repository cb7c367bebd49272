"""Beam search's row pass (tasks/translation/beam_rows.py): the C pass and its torch twin give log_softmax's
normalisation, the banned tokens masked and exact run maxima; beam search through it ranks and scores as the
log_softmax route did."""
from __future__ import annotations

import os

import pytest
import torch
from test_translation_model import BOS, EOS, PAD, source_batch, tiny_model

import tasks.translation.search as search
from tasks.translation.beam_rows import beam_rows, torch_rows
from tasks.translation.native import library

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
    monkeypatch.setattr(search, "beam_rows", via_log_softmax)
    want = run()
    assert [[ids for _, ids in sentence] for sentence in got] == [[ids for _, ids in sentence] for sentence in want]
    for mine, theirs in zip(got, want):
        torch.testing.assert_close(torch.tensor([s for s, _ in mine]), torch.tensor([s for s, _ in theirs]),
                                   atol=1e-5, rtol=0)
