"""The prefix beam search as it was before it was vectorised (tasks/speech/decoding.py at d270910, with main's ``allowed`` labels and score), kept
only as the reference that tests/test_speech_beam_vectorised.py compares the decoder's output with: one
dictionary of prefixes per frame, every extension scored in Python."""
from __future__ import annotations

import heapq
import math
from typing import Dict, List, Tuple

from tasks.speech.decoding import NEG_INF, _logadd


def _extensions(beams, frame, candidates, blank):
    nxt: Dict[Tuple[int, ...], List[float]] = {}
    parents: Dict[Tuple[int, ...], Tuple[Tuple[int, ...], int]] = {}

    def add(prefix, pb, pnb):
        entry = nxt.setdefault(prefix, [NEG_INF, NEG_INF])
        entry[0], entry[1] = _logadd(entry[0], pb), _logadd(entry[1], pnb)

    for prefix, (pb, pnb) in beams.items():
        total = _logadd(pb, pnb)
        add(prefix, total + frame[blank], NEG_INF)
        last = prefix[-1] if prefix else None
        for c in candidates:
            lp, longer = frame[c], prefix + (c,)
            parents[longer] = (prefix, c)
            if c == last:
                add(prefix, NEG_INF, pnb + lp)
                add(longer, NEG_INF, pb + lp)
            else:
                add(longer, NEG_INF, total + lp)
    return nxt, parents


def _best(nxt, parents, fused, beam, extend, bound_gain):
    bounded = []
    for order, (prefix, (pb, pnb)) in enumerate(nxt.items()):
        ctc = _logadd(pb, pnb)
        known = fused.get(prefix)
        bound = ctc + (known if known is not None else fused[parents[prefix][0]] + bound_gain)
        bounded.append((bound, -order, prefix, ctc, known))
    bounded.sort(key=lambda x: (x[0], x[1]), reverse=True)
    kept: List[Tuple[float, int, Tuple[int, ...], float]] = []
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


def reference_scored_beam_search(log_probs, beam=8, blank=0, prune=-12.0, lm=None, lm_weight=0.0, bonus=0.0,
                                 allowed=None):
    keep = None if allowed is None else frozenset(allowed)
    frames = log_probs.detach().float().cpu().tolist()
    beams = {(): (0.0, NEG_INF)}
    fused = {(): 0.0}

    def extend(prefix, score, label):
        return score + (lm_weight * lm.log_prob(prefix, label) if lm is not None else 0.0) + bonus

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


def reference_prefix_beam_search(*args, **kwargs):
    return reference_scored_beam_search(*args, **kwargs)[0]
