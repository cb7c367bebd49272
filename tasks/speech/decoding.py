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
from typing import TYPE_CHECKING, Collection, Dict, List, Optional, Tuple

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


def _extensions(beams, frame, candidates, blank):
    """The next frame's prefixes: prefix -> [log p_blank, log p_nonblank], and each new prefix's
    (parent, label)."""
    nxt: Dict[Tuple[int, ...], List[float]] = {}
    parents: Dict[Tuple[int, ...], Tuple[Tuple[int, ...], int]] = {}

    def add(prefix, pb, pnb):
        entry = nxt.setdefault(prefix, [NEG_INF, NEG_INF])
        entry[0], entry[1] = _logadd(entry[0], pb), _logadd(entry[1], pnb)

    for prefix, (pb, pnb) in beams.items():
        total = _logadd(pb, pnb)
        add(prefix, total + frame[blank], NEG_INF)           # a blank keeps the prefix
        last = prefix[-1] if prefix else None
        for c in candidates:
            lp, longer = frame[c], prefix + (c,)
            parents[longer] = (prefix, c)
            if c == last:
                add(prefix, NEG_INF, pnb + lp)               # repeat without blank: merged into the prefix
                add(longer, NEG_INF, pb + lp)                # repeat after a blank: a new label
            else:
                add(longer, NEG_INF, total + lp)
    return nxt, parents


def _best(nxt, parents, fused, beam, extend, bound_gain):
    """The ``beam`` best prefixes of ``nxt`` by CTC + fusion score, best first, with their fusion scores.
    A new prefix's fusion score is at most its parent's + ``bound_gain`` (the LM term is a weighted
    log-probability, <= 0), so prefixes are scored in the order of that bound and the LM is asked only
    until no bound can beat the beam's worst: the same beam as scoring all of them, with far fewer LM calls."""
    bounded = []
    for order, (prefix, (pb, pnb)) in enumerate(nxt.items()):
        ctc = _logadd(pb, pnb)
        known = fused.get(prefix)
        bound = ctc + (known if known is not None else fused[parents[prefix][0]] + bound_gain)
        bounded.append((bound, -order, prefix, ctc, known))
    bounded.sort(key=lambda x: (x[0], x[1]), reverse=True)
    kept: List[Tuple[float, int, Tuple[int, ...], float]] = []  # a min-heap: (score, -order, prefix, fusion)
    for bound, rank, prefix, ctc, known in bounded:
        if len(kept) == beam and bound <= kept[0][0]:
            break
        if known is None:
            parent, label = parents[prefix]
            known = extend(parent, fused[parent], label)
        item = (ctc + known, rank, prefix, known)
        if len(kept) < beam:
            heapq.heappush(kept, item)
        elif item[:2] > kept[0][:2]:
            heapq.heapreplace(kept, item)
    return [(prefix, fusion) for _, _, prefix, fusion in sorted(kept, key=lambda x: x[:2], reverse=True)]


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
    keep = None if allowed is None else frozenset(allowed)
    frames = log_probs.detach().float().cpu().tolist()
    beams: Dict[Tuple[int, ...], Tuple[float, float]] = {(): (0.0, NEG_INF)}  # prefix -> (log p_blank, log p_nonblank)
    # fusion score of each live prefix (a function of the prefix alone): lm_weight * log P_lm + bonus * length
    fused: Dict[Tuple[int, ...], float] = {(): 0.0}

    def extend(prefix: Tuple[int, ...], score: float, label: int) -> float:
        return score + (lm_weight * lm.log_prob(prefix, label) if lm is not None else 0.0) + bonus

    # a new prefix's fusion score is at most its parent's + this (a negative LM weight: no bound)
    bound_gain = bonus if lm is None or lm_weight >= 0 else math.inf
    for frame in frames:
        candidates = [c for c, lp in enumerate(frame) if lp >= prune and c != blank and (keep is None or c in keep)]
        nxt, parents = _extensions(beams, frame, candidates, blank)
        best = _best(nxt, parents, fused, beam, extend, bound_gain)
        beams = {prefix: tuple(nxt[prefix]) for prefix, _ in best}
        fused = dict(best)

    def final(kv) -> float:
        end = lm_weight * lm.log_prob_end(kv[0]) if lm is not None else 0.0
        return _logadd(*kv[1]) + fused[kv[0]] + end
    best = max(beams.items(), key=final)
    return list(best[0]), final(best)
