"""SQuAD v1.1 metrics (the official evaluation's definitions), span decoding and trivial baselines.

EM and F1 per question are the maximum over its gold answers after normalisation (lower case, drop
punctuation, drop the articles a/an/the, collapse whitespace); F1 is the token-overlap F1 of the
normalised strings. Corpus EM/F1 = 100 x sum / number of questions: the task sums ``em``/``f1``/``n``
in its logging outputs (exact under DDP) and divides once.
"""
from __future__ import annotations

import random
import re
import string
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:  # v1.1: also when both normalise to nothing
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def score(prediction: str, golds: Sequence[str]) -> Tuple[float, float]:
    """(EM, F1) of one prediction: the best over the gold answers."""
    return max(exact_match(prediction, g) for g in golds), max(f1(prediction, g) for g in golds)


def reduce_squad(summed: Dict[str, float], prefix: str = "") -> Dict[str, float]:
    n = max(summed.get("n", 0.0), 1.0)
    return {f"{prefix}em": 100.0 * summed.get("em", 0.0) / n, f"{prefix}f1": 100.0 * summed.get("f1", 0.0) / n}


def decode_spans(start_logits: Tensor, end_logits: Tensor, mask_pad: Tensor, max_len: int = 15,
                 sentence_ends: Optional[Tensor] = None, type_match: Optional[Tensor] = None,
                 type_prior: Union[float, Tensor] = 0.0) -> Tuple[Tensor, Tensor]:
    """Best (start, end) per example with start <= end < start + max_len over real tokens.

    start/end_logits (B, L), mask_pad (B, L) true on padding; the span score is
    log p_start(i) + log p_end(j), i.e. DrQA's argmax of p_start(i) * p_end(j). ``sentence_ends`` (B, L):
    true on a sentence's final punctuation; a span then holds none (an answer is inside one sentence:
    "Warsaw in 1867. She moved to Paris to study at the Sorbonne" is not a place). ``type_match`` (B, L):
    true on tokens of the entity type the question asks for (tasks/squad/answer_types.py); with
    ``type_prior`` > 0 a span gains ``type_prior`` for a start and for an end on such a token (a paragraph
    without one decodes as before; task.answer_type_prior: why and how it was chosen, docs/results_squad.md);
    a (B,) tensor gives each example its own prior (task.where_when_prior).
    """
    neg = torch.finfo(start_logits.dtype).min
    s = start_logits.float().masked_fill(mask_pad, neg).log_softmax(-1)
    e = end_logits.float().masked_fill(mask_pad, neg).log_softmax(-1)
    prior = torch.as_tensor(type_prior, dtype=s.dtype, device=s.device).reshape(-1, 1)  # (1, 1) or (B, 1)
    if type_match is not None and bool((prior > 0).any()):
        bonus = prior * type_match.float()  # zero everywhere in a paragraph without such a token
        s, e = s + bonus, e + bonus
    length = s.size(1)
    scores = s.unsqueeze(2) + e.unsqueeze(1)  # (B, i, j)
    i = torch.arange(length, device=s.device)
    allowed = (i.view(-1, 1) <= i.view(1, -1)) & (i.view(1, -1) < i.view(-1, 1) + max_len)
    scores = scores.masked_fill(~allowed, float("-inf"))
    scores = scores.masked_fill(mask_pad.unsqueeze(2) | mask_pad.unsqueeze(1), float("-inf"))
    if sentence_ends is not None:  # ends within i..j = count(j) - count(i - 1)
        count = sentence_ends.long().cumsum(1)
        before = count - sentence_ends.long()
        scores = scores.masked_fill(count.unsqueeze(1) - before.unsqueeze(2) > 0, float("-inf"))
    best = scores.view(scores.size(0), -1).argmax(-1)
    return best // length, best % length


# ---- trivial baselines: what a reader must beat ----------------------------------------------------
def question_type(question: str) -> str:
    """The answer type a wh-word asks for (the generator's five types; real questions map roughly)."""
    q = question.lower()
    if re.search(r"\b(what|which|in what) year\b", q):
        return "year"
    if re.search(r"\bwhen\b|\bwhat (date|day|month)\b", q):
        return "date"
    if re.search(r"\bhow (many|much|long|far|old)\b|\bwhat (number|percentage)\b", q):
        return "number"
    if re.search(r"\bwho(m|se)?\b", q):
        return "name"
    return "noun_phrase"


def first_of_type(context: str, question: str) -> str:
    """The first span in the context of the type the question asks for (a date also answers "when"
    as a year does); the first name when there is none; the first word when there is no name."""
    from tasks.squad.generator.offline_corpus import find_spans
    wanted = question_type(question)
    spans = sorted(find_spans(context), key=lambda c: c[1])
    accept = {"date": ("date", "year")}.get(wanted, (wanted,))
    for types in (accept, ("name",)):
        for kind, start, end, _, _ in spans:
            if kind in types:
                return context[start:end]
    words = context.split()
    return words[0] if words else ""


def random_span(context_spans: Sequence[Tuple[int, int]], context: str, seed: str, max_len: int = 4) -> str:
    """A uniformly random span of 1..max_len tokens, seeded per question (reproducible)."""
    if not context_spans:
        return ""
    rng = random.Random(seed)
    start = rng.randrange(len(context_spans))
    end = min(len(context_spans) - 1, start + rng.randrange(max_len))
    return context[context_spans[start][0]:context_spans[end][1]]


def baseline_sums(examples: List, token_spans: List[Sequence[Tuple[int, int]]]) -> Dict[str, float]:
    """Summed EM/F1 of the two baselines over a split (same counts as the reader's, so same scale)."""
    out = {"n": float(len(examples)), "type_em": 0.0, "type_f1": 0.0, "random_em": 0.0, "random_f1": 0.0}
    for ex, spans in zip(examples, token_spans):
        for name, pred in (("type", first_of_type(ex.context, ex.question)),
                           ("random", random_span(spans, ex.context, ex.qid))):
            em, f = score(pred, ex.answers)
            out[f"{name}_em"] += em
            out[f"{name}_f1"] += f
    return out
