"""Word and character error counts, summed over utterances (and DDP ranks) before dividing:

    WER = (substitutions + deletions + insertions over all utterances) / reference words of all utterances

which is corpus-level WER as jiwer and sclite compute it (never a mean of per-utterance rates). CER is
the same over characters, spaces included (as jiwer.cer).
"""
from __future__ import annotations

from typing import Dict, Iterable, Sequence, Tuple


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Levenshtein distance (substitutions, deletions, insertions all cost 1), one row at a time."""
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1]


def error_counts(pairs: Iterable[Tuple[str, str]]) -> Dict[str, float]:
    """Summable counts for (reference, hypothesis) pairs."""
    counts = {"word_errors": 0.0, "words": 0.0, "char_errors": 0.0, "chars": 0.0}
    for ref, hyp in pairs:
        counts["word_errors"] += edit_distance(ref.split(), hyp.split())
        counts["words"] += len(ref.split())
        counts["char_errors"] += edit_distance(ref, hyp)
        counts["chars"] += len(ref)
    return counts


def rates(counts: Dict[str, float]) -> Dict[str, float]:
    """WER and CER in percent from summed counts."""
    return {"wer": 100.0 * counts["word_errors"] / max(counts["words"], 1.0),
            "cer": 100.0 * counts["char_errors"] / max(counts["chars"], 1.0)}
