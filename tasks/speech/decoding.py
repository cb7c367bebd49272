"""CTC decoding: greedy (best path) and prefix beam search, over log-probabilities with blank = 0.

    hyps = greedy_decode(log_probs, lengths)              # log_probs (T, B, V) -> B lists of label ids
    hyp = prefix_beam_search(log_probs[:n, b], beam=8)    # one utterance (T, V)
    hyp = prefix_beam_search(log_probs[:n, b], beam=8, lm=char_lm, lm_weight=0.5, bonus=1.0)  # + a char LM
    bonus = gated_bonus(hyps[b], n, 1.0, chars_per_step)  # 0 where the greedy output is nearly empty

Greedy takes the most likely label per frame, then collapses repeats and drops blanks ("aa-a" -> "aa").
Prefix beam search (Hannun et al. 2014; optionally fused with a character n-gram LM, tasks/speech/char_lm.py)
keeps the ``beam`` most probable label prefixes, each with the probability of its paths ending in blank
and in non-blank — which is what lets "a-a" (two a's) and "aa" (one) be told apart — and sums the paths
that collapse to the same prefix.
With beam 1 it follows the single best prefix: the same output as greedy when each frame's best label is
clearly best (as in trained CTC models; a 51/49 frame can differ, since a prefix sums over paths).
"""
from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Collection, List, Optional, Tuple

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor

    from tasks.speech.char_lm import CharNgramLM

NEG_INF = -math.inf


def collapse(path: List[int], blank: int = 0) -> List[int]:
    """Merge repeated labels, then remove blanks: the CTC many-to-one map from a frame path to labels."""
    out, previous = [], None
    for label in path:
        if label != previous and label != blank:
            out.append(label)
        previous = label
    return out


def greedy_decode(log_probs: Tensor, lengths: Tensor, blank: int = 0) -> List[List[int]]:
    best = log_probs.argmax(-1).t().tolist()  # (B, T)
    return [collapse(path[: int(n)], blank) for path, n in zip(best, lengths.tolist())]


# below this fraction of the characters the training data has per output step, an utterance's greedy output
# counts as "nearly empty" (CTC's blank phase, a failed model): the acoustics wrote next to nothing there
NEARLY_EMPTY_FRACTION = 0.25


def gated_bonus(greedy: List[int], steps: int, bonus: float, chars_per_step: float,
                nearly_empty: float = NEARLY_EMPTY_FRACTION) -> float:
    """The LM fusion's per-character bonus for one utterance: ``bonus`` (tuned on validation,
    python -m tasks.speech.lm_tuning) where the greedy output has at least ``nearly_empty`` x ``chars_per_step`` x
    ``steps`` labels, else 0. The bonus offsets the LM's pull towards short outputs; on an utterance whose
    acoustics produced (nearly) nothing it would only reward the LM for writing text of its own, which
    lowers the CER of a model that learned nothing and can push its WER past 100 by inserting words."""
    return bonus if len(greedy) >= nearly_empty * chars_per_step * steps else 0.0


def _logadd(a: float, b: float) -> float:
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    hi, lo = (a, b) if a > b else (b, a)
    return hi + math.log1p(math.exp(lo - hi))


# the widest beam accepted: the work per frame grows with beam x labels (a beam of 1000 took 26 s on a 2 s
# clip) while CTC beams beyond a few dozen change almost nothing (task.beam_size, predict.py beam_size=)
MAX_BEAM = 128


def check_beam(beam: int) -> None:
    if not 1 <= beam <= MAX_BEAM:
        raise ValueError(f"task.beam_size: expected an integer from 1 to {MAX_BEAM}, received {beam}")


CHUNK = 32  # sorted entries checked at a time against the beam's worst (numpy) before any is visited in Python


class _Frame:
    """One frame's step of the search, vectorised over (live prefix, label): every extension of a live
    prefix by a label that is not itself live gets exactly one path, so its CTC score is one addition,
    done for all at once in float64 (the same IEEE sums as the scalar search: identical scores). Only the
    prefixes that stay live (at most ``beam``) collect several paths; they are summed in Python in the
    order the scalar search summed them, and each entry carries the position the scalar search gave it
    (its first touch), which breaks ties exactly as before."""

    def __init__(self, prefixes, pbs, pnbs, frame, candidates, blank):
        self.width = len(frame) + 1                   # order keys: live prefix position x width + label + 1
        totals = [_logadd(pb, pnb) for pb, pnb in zip(pbs, pnbs)]
        column = {c: k for k, c in enumerate(candidates.tolist())}
        self.ctc = np.add.outer(np.asarray(totals, dtype=np.float64), frame[candidates])  # total + lp: a new label
        live = {p: j for j, p in enumerate(prefixes)}
        merged = np.zeros(self.ctc.shape, dtype=bool)
        kids: List[List[int]] = [[] for _ in prefixes]     # per live prefix: labels that lead to another live one
        for j, p in enumerate(prefixes):
            parent = live.get(p[:-1]) if p else None
            if parent is not None and p[-1] in column:
                merged[parent, column[p[-1]]] = True
                kids[parent].append(p[-1])
        for i, p in enumerate(prefixes):              # a repeat of the last label after a blank: from p_blank
            if p and p[-1] in column:
                self.ctc[i, column[p[-1]]] = pbs[i] + float(frame[p[-1]])
        self.kept_apart = merged
        self.live = self._sum_live(prefixes, pbs, pnbs, totals, frame, column, live, kids, blank)

    def _sum_live(self, prefixes, pbs, pnbs, totals, frame, column, live, kids, blank):
        """(log p_blank, log p_nonblank, order key) of each live prefix at the next frame, summed in the scalar
        search's order: live prefixes best first, each one's blank, then its labels in increasing order."""
        acc = [[NEG_INF, NEG_INF, math.inf] for _ in prefixes]

        def add(j, pb, pnb, key):
            entry = acc[j]
            entry[0], entry[1], entry[2] = _logadd(entry[0], pb), _logadd(entry[1], pnb), min(entry[2], key)

        lp_blank = float(frame[blank])
        for i, p in enumerate(prefixes):
            base = i * self.width
            add(i, totals[i] + lp_blank, NEG_INF, base)
            last = p[-1] if p else None
            for c in sorted(set(kids[i]) | ({last} if last in column else set())):
                lp = float(frame[c])
                child = live.get(p + (c,)) if c in kids[i] else None
                if c == last:
                    add(i, NEG_INF, pnbs[i] + lp, base + c + 1)
                    if child is not None:
                        add(child, NEG_INF, pbs[i] + lp, base + c + 1)
                else:
                    add(child, NEG_INF, totals[i] + lp, base + c + 1)
        return acc


def _best(step: "_Frame", prefixes, candidates, fused, rows, beam, extend, bound_gain):
    """The ``beam`` best next prefixes by CTC + fusion score, best first: [(prefix, (pb, pnb), fusion)].
    A new prefix's fusion score is at most its parent's + ``bound_gain`` (the LM term is a weighted
    log-probability, <= 0), so entries are visited in the order of that bound and the LM is asked only
    until no bound can beat the beam's worst: the same beam as scoring all of them, with far fewer LM calls.
    ``rows``: (live prefixes, labels) fusion scores of the extensions asked for so far, NaN where not yet."""
    parent, column = np.nonzero(~step.kept_apart)
    ctc = step.ctc[parent, column]
    labels = candidates[column]
    live_ctc = [_logadd(pb, pnb) for pb, pnb, _ in step.live]
    gains = np.asarray([f + bound_gain for f in fused], dtype=np.float64)
    bounds = np.concatenate([ctc + gains[parent], np.asarray(live_ctc, dtype=np.float64) + np.asarray(fused)])
    scores = np.concatenate([ctc + rows[parent, labels], np.asarray(live_ctc, dtype=np.float64) + np.asarray(fused)])
    keys = np.concatenate([parent * step.width + labels + 1, np.asarray([k for *_, k in step.live], dtype=np.int64)])
    order = np.lexsort((keys, -bounds))
    n, ranks = len(ctc), (-keys).tolist()
    bounds, scores = bounds[order], scores[order]
    kept: List[Tuple[float, int, int]] = []  # a min-heap: (score, -order key, entry)
    for start in range(0, len(order), CHUNK):
        end = start + CHUNK
        visit = np.arange(start, min(end, len(order)))
        if len(kept) == beam:  # the beam's worst only rises: what is below it now, bound above, changes nothing
            worst = kept[0][0]
            visit = visit[(bounds[start:end] <= worst) | ~(scores[start:end] < worst)]
        for k in visit.tolist():
            bound, score, e = float(bounds[k]), float(scores[k]), int(order[k])
            if len(kept) == beam and bound <= kept[0][0]:
                return _kept(kept, step, prefixes, fused, rows, parent, labels, ctc, n)
            if score != score:  # NaN: this extension's LM term not asked for yet
                i, c = int(parent[e]), int(labels[e])
                rows[i, c] = extend(prefixes[i], fused[i], c)
                score = float(ctc[e]) + float(rows[i, c])
            if len(kept) < beam:
                heapq.heappush(kept, (score, ranks[e], e))
            elif score > kept[0][0] or (score == kept[0][0] and ranks[e] > kept[0][1]):
                heapq.heapreplace(kept, (score, ranks[e], e))
    return _kept(kept, step, prefixes, fused, rows, parent, labels, ctc, n)


def _kept(kept, step, prefixes, fused, rows, parent, labels, ctc, n):
    """The heap's entries as (prefix, (pb, pnb), fusion), best first."""
    best = []
    for _, _, e in sorted(kept, reverse=True):
        if e < n:
            i, c = int(parent[e]), int(labels[e])
            best.append((prefixes[i] + (c,), (NEG_INF, float(ctc[e])), float(rows[i, c])))
        else:
            best.append((prefixes[e - n], tuple(step.live[e - n][:2]), fused[e - n]))
    return best


def prefix_beam_search(log_probs: Tensor, beam: int = 8, blank: int = 0, prune: float = -12.0,
                       lm: Optional["CharNgramLM"] = None, lm_weight: float = 0.0, bonus: float = 0.0,
                       allowed: Optional[Collection[int]] = None) -> List[int]:
    """The label ids of ``scored_beam_search`` (below), without their score."""
    return scored_beam_search(log_probs, beam, blank, prune, lm, lm_weight, bonus, allowed)[0]


def scored_beam_search(log_probs: Tensor, beam: int = 8, blank: int = 0, prune: float = -12.0,
                       lm: Optional["CharNgramLM"] = None, lm_weight: float = 0.0, bonus: float = 0.0,
                       allowed: Optional[Collection[int]] = None) -> Tuple[List[int], float]:
    """Most probable label sequence of one utterance ``log_probs`` (T, V) under the CTC model, or with
    ``lm`` under shallow fusion: prefixes ranked by log P_ctc + lm_weight * log P_lm + bonus * length
    (the bonus offsets the LM's bias towards short outputs), the end of utterance scored at the last frame.

    ``prune``: labels whose frame log-probability is below it are not tried as extensions (they cannot
    change a beam's ranking meaningfully and cost most of the time). ``allowed``: the only labels that may
    be written (one language's alphabet, tasks/speech/languages.py); None: all.
    Returns the best label ids and their score (CTC + fusion, end of utterance included), which compares
    decodings of the same audio under different LMs and alphabets.
    Only the ``beam`` live prefixes and their scores are kept from frame to frame, so memory does not grow
    with the utterance's length beyond the prefixes themselves.
    """
    check_beam(beam)
    frames = log_probs.detach().float().cpu().numpy().astype(np.float64)
    # the live prefixes, best first, with (log p_blank, log p_nonblank) and their fusion scores (a function of
    # the prefix alone): lm_weight * log P_lm + bonus * length; rows: their extensions' fusion scores asked so far
    prefixes: List[Tuple[int, ...]] = [()]
    pbs, pnbs, fused = [0.0], [NEG_INF], [0.0]
    rows = np.full((1, frames.shape[1]), np.nan)

    def extend(prefix: Tuple[int, ...], score: float, label: int) -> float:
        return score + (lm_weight * lm.log_prob(prefix, label) if lm is not None else 0.0) + bonus

    # a new prefix's fusion score is at most its parent's + this (a negative LM weight: no bound)
    bound_gain = bonus if lm is None or lm_weight >= 0 else math.inf
    labels = np.arange(frames.shape[1])
    writable = labels != blank
    if allowed is not None:
        writable &= np.isin(labels, np.fromiter(allowed, dtype=np.int64))
    for frame in frames:
        candidates = labels[(frame >= prune) & writable]
        step = _Frame(prefixes, pbs, pnbs, frame, candidates, blank)
        best = _best(step, prefixes, candidates, fused, rows, beam, extend, bound_gain)
        was = {p: i for i, p in enumerate(prefixes)}
        prefixes = [p for p, _, _ in best]
        pbs, pnbs = [s[0] for _, s, _ in best], [s[1] for _, s, _ in best]
        fused = [f for *_, f in best]
        rows = np.stack([rows[was[p]] if p in was else np.full(frames.shape[1], np.nan) for p in prefixes])

    def final(j: int) -> float:
        end = lm_weight * lm.log_prob_end(prefixes[j]) if lm is not None else 0.0
        return _logadd(pbs[j], pnbs[j]) + fused[j] + end
    best = max(range(len(prefixes)), key=final)
    return list(prefixes[best]), final(best)
