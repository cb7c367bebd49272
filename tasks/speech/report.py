"""What a speech evaluation reports: WER/CER from summed edit counts, rates per group of utterances and the
test printout (rates, groups, trivial baselines, ten random utterances, reference vs hypothesis).

Groups, each from summed edit counts (as the overall rates):
    language   wer_cs, cer_cs, ...            records with a language field (the voice-pack corpus)
    voice      wer_voice_cs-small, ...        voices without an engine prefix, when there are at most 40
    engine     wer_espeak, cer_espeak, ...    synthetic voices "engine:voice" (the offline corpus)
    kind       wer_digits, cer_sentence, ...  the offline corpus's text kinds
and ``language_accuracy`` (percent of utterances decoded in their own language, tasks/speech/languages.py)
where the records have both a language and the language they were decoded in.

Word and character error counts (``error_counts``, then ``rates``) are summed over utterances (and DDP ranks)
before dividing:

    WER = (substitutions + deletions + insertions over all utterances) / reference words of all utterances

which is corpus-level WER as jiwer and sclite compute it (never a mean of per-utterance rates). CER is
the same over characters, spaces included (as jiwer.cer).
"""
from __future__ import annotations

import random
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple

from tasks.engine.base import Record


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


MAX_VOICE_GROUPS = 40  # a corpus with hundreds of speakers (LibriSpeech) gets no per-speaker lines


def _groups(records: List[Record]) -> Dict[str, List[Record]]:
    groups: Dict[str, List[Record]] = {}
    voices = {r.get("voice") for r in records if r.get("voice")}
    for r in records:
        voice = r.get("voice") or ""
        keys = [r.get("language") or "", r.get("kind") or ""]
        if ":" in voice:
            keys.append(voice.split(":")[0])
        elif voice and len(voices) <= MAX_VOICE_GROUPS:
            keys.append(f"voice_{voice}")
        for key in keys:
            if key:
                groups.setdefault(key, []).append(r)
    return groups


def group_rates(records: List[Record]) -> Dict[str, float]:
    """wer_<group> / cer_<group> for every group kind with more than one group."""
    groups = _groups(records)
    out: Dict[str, float] = {}
    for family in ("language", "kind", "engine", "voice"):
        names = [g for g in groups if _family(g, records) == family]
        if len(names) < 2:
            continue
        for name in sorted(names):
            r = rates(error_counts((x["reference"], x["hypothesis"]) for x in groups[name]))
            out[f"wer_{name}"], out[f"cer_{name}"] = r["wer"], r["cer"]
    known = [r for r in records if r.get("language") and r.get("decoded_language")]
    if known:
        out["language_accuracy"] = 100.0 * sum(r["language"] == r["decoded_language"] for r in known) / len(known)
    return out


def _family(group: str, records: List[Record]) -> str:
    if group.startswith("voice_"):
        return "voice"
    if any(r.get("language") == group for r in records):
        return "language"
    if any(r.get("kind") == group for r in records):
        return "kind"
    return "engine"


def test_report(records: List[Record], metrics: Mapping[str, float], extra: Mapping[str, float], word: str,
                seed: int = 0, examples: int = 10) -> str:
    counts = {}
    for r in records:
        counts[r.get("voice") or ""] = counts.get(r.get("voice") or "", 0) + 1
    groups = [k[4:] for k in extra if k.startswith("wer_") and not k.startswith("wer_voice_")]
    voices = [k[10:] for k in extra if k.startswith("wer_voice_")]
    lines = [f"[speech] test ({len(records)} utterances): WER {metrics['wer']:.2f}% CER {metrics['cer']:.2f}%"]
    if groups:
        lines.append("[speech] test WER / CER by " + ", ".join(f"{g} {extra['wer_' + g]:.1f} / {extra['cer_' + g]:.1f}"
                                                              for g in groups))
    if "language_accuracy" in extra:
        lines.append(f"[speech] language identified correctly: {extra['language_accuracy']:.1f}%")
    if voices:
        lines.append("[speech] test WER / CER by voice: " + ", ".join(
            f"{v} ({counts.get(v, 0)}) {extra['wer_voice_' + v]:.1f} / {extra['cer_voice_' + v]:.1f}" for v in voices))
    lines.append(f"[speech] trivial baselines: empty output WER {extra['baseline_empty_wer']:.0f}% CER 100%, "
                 f"'{word}' for every utterance WER {extra['baseline_frequent_word_wer']:.1f}% "
                 f"CER {extra['baseline_frequent_word_cer']:.1f}%")
    pool = sorted(records, key=lambda r: str(r["id"]))  # batch order aside: the same draw for the same seed
    picked = sorted(random.Random(seed).sample(range(len(pool)), min(examples, len(pool))))
    lines.append(f"[speech] {len(picked)} random test utterances (reference / hypothesis):")
    for i in picked:
        r = pool[i]
        lines.append(f"  {r['id']}\n    REF: {r['reference']}\n    HYP: {r['hypothesis']}")
    return "\n".join(lines)
