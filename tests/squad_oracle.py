"""An independent re-implementation of the official SQuAD v1.1 evaluation (evaluate-v1.1.py), written
for these tests from the published definition, so that tasks/squad/metrics.py is checked against a
second implementation rather than against itself.

Official definition: normalise = lower case, remove punctuation (string.punctuation), remove the words
a/an/the, collapse whitespace; EM = normalised strings equal; F1 = harmonic mean of token precision and
recall of the normalised strings (bag of tokens; 0 when nothing is shared); per question the maximum
over the gold answers; corpus scores = 100 x mean over all questions of the data file (an unanswered
question scores 0).
"""
from __future__ import annotations

import json
import re
import string
from collections import Counter
from pathlib import Path
from typing import Dict, List

_PUNCT_RE = re.compile("[" + re.escape(string.punctuation) + "]")


def _norm(s: str) -> List[str]:
    s = _PUNCT_RE.sub("", s.lower())
    return [w for w in s.split() if w not in ("a", "an", "the")]


def oracle_em(pred: str, gold: str) -> float:
    return 1.0 if _norm(pred) == _norm(gold) else 0.0


def oracle_f1(pred: str, gold: str) -> float:
    p, g = _norm(pred), _norm(gold)
    common = Counter(p) & Counter(g)
    overlap = sum(common.values())
    if not overlap:
        return 0.0
    return 2.0 * overlap / (len(p) + len(g))  # = 2PR / (P + R) with P = overlap/|p|, R = overlap/|g|


def evaluate_files(data_file: Path, predictions_file: Path) -> Dict[str, float]:
    data = json.loads(Path(data_file).read_text(encoding="utf-8"))["data"]
    predictions = json.loads(Path(predictions_file).read_text(encoding="utf-8"))
    em = f1 = total = 0.0
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                golds = [a["text"] for a in qa["answers"]]
                em += max(oracle_em(predictions[qa["id"]], g) for g in golds)
                f1 += max(oracle_f1(predictions[qa["id"]], g) for g in golds)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}
