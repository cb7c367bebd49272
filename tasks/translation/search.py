"""Batched greedy and beam search over ``Seq2SeqTransformer``'s incremental decoding state.

Both encode once, then feed one token per step: each step reuses the cached self-attention keys and
values, the projected encoder keys/values and (Transformer+SRU) the decoder SRU's cell state, so a step
costs O(prefix) attention instead of re-running the whole prefix.

Rules both searches share, so that beam search with beam 1 returns exactly the greedy output:
- ``<pad>`` and ``<s>`` are never generated;
- sentence i may produce at most ``max_len_i = max_len_a * src_len_i + max_len_b`` tokens including
  ``</s>``: at its last step only ``</s>`` is allowed.
Beam search (fairseq's bookkeeping, vectorised): each step takes the 2K best continuations of the K
live hypotheses; a ``</s>`` among the first K finishes a hypothesis with score
``sum log p / len ** length_penalty`` (len counts ``</s>``), the K best other continuations live on.
A sentence is done once it has K finished hypotheses; the best normalised one is returned, and its rows
leave the batch (a batch's short sentences stop costing once done).
"""
from __future__ import annotations

from typing import Any, List, Optional

import torch
from torch import Tensor

from sru.ops.backends import cpu_decoding

NEG_INF = float("-inf")
RUN = 32  # best_continuations ranks runs of this many tokens by their best before the tokens in them


def max_lengths(src_pad: Tensor, max_len_a: float, max_len_b: int, max_positions: int) -> Tensor:
    src_len = (~src_pad).sum(0)
    return (src_len.float() * max_len_a + max_len_b).long().clamp(1, max_positions - 1)


def _next_logits(model, prev: Tensor, state, step: int, limit: Tensor, pad: int, bos: int, eos: int,
                 statistics: bool = False):
    """Float32 logits of the next token (N, V) after feeding ``prev`` (N,) with the shared rules (a forbidden
    token's logit is -inf; a forced row keeps only </s>'s), and with ``statistics`` (beam search) each row's
    log-partition over the whole vocabulary before the rules, as log_softmax normalised (log p = logits -
    log_partition), and the maxima of its runs of ``RUN`` tokens after them (``beam_rows``); else None, None."""
    logits, state = model.decode(prev.unsqueeze(0), state)
    logits = logits[0].float()  # the decoder's fresh output (a copy under bf16): written in place below
    if statistics:
        log_partition, run_max = cpu_decoding.beam_rows(logits, (pad, bos), RUN)
    else:
        log_partition = run_max = None
        logits[:, pad] = NEG_INF
        logits[:, bos] = NEG_INF
    forced = step + 1 >= limit  # (N,) the last allowed step: only </s>
    if forced.any():
        eos_logit = logits[forced, eos]
        logits[forced] = NEG_INF
        logits[forced, eos] = eos_logit
        if run_max is not None:
            run_max[forced] = NEG_INF
            run_max[forced, eos // RUN] = eos_logit
    return logits, log_partition, run_max, state


@torch.no_grad()
def greedy_search(model, src: Tensor, src_pad: Tensor, bos: int, eos: int, pad: int,
                  max_len_a: float = 1.5, max_len_b: int = 10) -> List[List[int]]:
    """The arg-max token at every step; returns each sentence's ids without <s> and </s>."""
    B = src.size(1)
    limit = max_lengths(src_pad, max_len_a, max_len_b, model.max_positions)
    state = model.start_decoding(*model.encode(src, src_pad))
    prev = torch.full((B,), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    out: List[Tensor] = []
    for step in range(int(limit.max())):
        logits, _, _, state = _next_logits(model, prev, state, step, limit, pad, bos, eos)
        prev = logits.argmax(-1).masked_fill(done, eos)
        out.append(prev)
        done |= prev == eos
        if bool(done.all()):
            break
    return [_strip(seq, eos) for seq in torch.stack(out, 1).tolist()]


@torch.no_grad()
def beam_search(model, src: Tensor, src_pad: Tensor, bos: int, eos: int, pad: int, beam_size: int = 4,
                length_penalty: float = 1.0, max_len_a: float = 1.5, max_len_b: int = 10,
                nbest: Optional[int] = None) -> List[Any]:
    """The best hypothesis of each sentence; with ``nbest``, its ``nbest`` best as (score, ids), best first."""
    B, K = src.size(1), int(beam_size)
    device = src.device
    enc, enc_pad = model.encode(src, src_pad)
    state = model.start_decoding(enc, enc_pad, beam=K)  # the encoder side once per sentence, not per hypothesis
    limit = max_lengths(src_pad, max_len_a, max_len_b, model.max_positions).repeat_interleave(K)
    tokens = torch.full((B * K, 1), bos, dtype=torch.long, device=device)
    scores = torch.full((B, K), NEG_INF, device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one so the first step does not pick duplicates
    finished: List[List[tuple]] = [[] for _ in range(B)]
    alive = list(range(B))  # the sentence of each live row block: finished sentences leave the batch
    for step in range(int(limit.max())):
        logits, log_partition, run_max, state = _next_logits(model, tokens[:, -1], state, step, limit, pad, bos,
                                                             eos, statistics=True)
        n, V = len(alive), logits.size(1)
        # scores + log p = (scores - log_partition) + logits: one subtraction per row, not per word
        top_scores, top_index = best_continuations(logits, scores - log_partition.view(n, K), min(2 * K, K * V),
                                                   run_max=run_max)
        beam, token = top_index // V, top_index % V
        is_eos = token == eos
        ends = is_eos[:, :K] & torch.isfinite(top_scores[:, :K])
        for b, j in ends.nonzero().tolist():
            if len(finished[alive[b]]) < K:
                seq = tokens[b * K + beam[b, j], 1:].tolist()
                finished[alive[b]].append((top_scores[b, j].item() / (len(seq) + 1) ** length_penalty, seq))
        keep = [b for b in range(n) if len(finished[alive[b]]) < K]
        if not keep:
            break
        live_scores, live = top_scores.masked_fill(is_eos, NEG_INF).topk(K, dim=1)
        rows = (torch.arange(n, device=device).unsqueeze(1) * K + beam.gather(1, live))
        new_tokens = token.gather(1, live)
        sentences = None
        if len(keep) < n:  # drop the finished sentences' rows: every later step is cheaper by their share
            order = fill_from_the_end(keep, n)
            sentences = torch.tensor(order, device=device)
            rows, new_tokens, live_scores = rows[sentences], new_tokens[sentences], live_scores[sentences]
            limit = limit.view(n, K)[sentences].view(-1)
            alive = [alive[b] for b in order]
        rows = rows.view(-1)
        tokens = torch.cat([tokens.index_select(0, rows), new_tokens.view(-1, 1)], 1)
        scores = live_scores
        state = model.reorder_state(state, rows, sentences)  # rows stay within their sentence's K
    if nbest is not None:
        return [sorted(f, key=lambda x: -x[0])[:nbest] for f in finished]
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]


def best_continuations(lp: Tensor, scores: Tensor, k: int, run: int = RUN, run_max: Optional[Tensor] = None):
    """The k best ``scores[b, j] + lp[b * K + j, v]`` over each sentence b's K x V continuations: the values and
    indices (j * V + v) of ``(scores.view(-1, 1) + lp).view(n, K * V).topk(k)`` (the same floats), without adding
    and ranking all of them. Each hypothesis's vocabulary is cut into runs of ``run`` tokens, ranked by their
    best continuation; the k best continuations lie in the k best runs (a run holding one of them has a best
    at least as good, and at most k runs can have one that good), so only those k x ``run`` are ranked. Faster
    than ranking every word (docs/design_notes.md#beam-search). ``lp``: log p, or the
    logits with each row's log-partition subtracted from ``scores`` instead; ``run_max``: the runs' maxima
    of ``lp`` (N, V // run) when already known (``beam_rows``)."""
    n, K = scores.shape
    N, V = lp.shape
    if V % run or k > K * (V // run):
        return (scores.view(N, 1) + lp).view(n, K * V).topk(k, dim=1)
    runs = V // run
    if run_max is None:
        run_max = lp.view(N, runs, run).amax(-1)
    best = scores.view(N, 1) + run_max  # adding one float keeps the order: exact bounds
    _, top_runs = best.view(n, K * runs).topk(k, dim=1)
    first_row = torch.arange(n, device=lp.device).unsqueeze(1) * K
    row = first_row + top_runs // runs  # (n, k) the hypothesis row of each chosen run
    token = (top_runs % runs).unsqueeze(-1) * run + torch.arange(run, device=lp.device)  # (n, k, run)
    cand = scores.view(N)[row].unsqueeze(-1) + lp[row.unsqueeze(-1), token]
    top, j = cand.view(n, k * run).topk(k, dim=1)
    beam = row.gather(1, j // run) - first_row
    return top, beam * V + token.view(n, k * run).gather(1, j)


def fill_from_the_end(keep: List[int], n: int) -> List[int]:
    """The kept ones of sentences 0 .. n - 1 (``keep``, ascending) in the order that moves the fewest: those
    among the first len(keep) stay in place, the ones beyond fill the places of the dropped ones, so the
    decoding state copies only their rows (``Seq2SeqTransformer.reorder_state``)."""
    m, kept = len(keep), set(keep)
    movers = iter(b for b in keep if b >= m)
    return [b if b in kept else next(movers) for b in range(m)]


def _strip(seq: List[int], eos: int) -> List[int]:
    return seq[: seq.index(eos)] if eos in seq else seq
