"""A character n-gram language model for CTC beam search (shallow fusion), trained on the training
transcripts in the task's setup: seconds, no extra data, nothing saved beside the run.

    lm = CharNgramLM.fit(train_label_sequences, order=6, vocab_size=len(vocab))
    lm.log_prob(context, label)   # log P(label | the last order-1 labels of context)
    lm.log_prob_end(context)      # log P(end of utterance | context)

Smoothing: interpolated Witten-Bell (Witten & Bell 1991; the form in Chen & Goodman 1998, eq. 12):

    P(c | h) = (C(h c) + T(h) * P(c | h')) / (C(h) + T(h))

where h' is h without its oldest label, C counts training n-grams and T(h) is the number of distinct
labels seen after h; the recursion ends in the uniform distribution over the labels (and the end mark).
It needs no tuned discount, suits small corpora (a few thousand utterances here) and always gives every
label a non-zero probability, so a rare word the acoustic model hears is never ruled out.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Dict, Iterable, Sequence, Tuple

BOS = -1  # the context before an utterance's first label
EOS = -2  # the end of an utterance, predicted like a label
# probabilities remembered at most (a few tens of MB): the beam asks for the same (history, label) pairs
# many times within an utterance, but a long file brings ever new histories, so an unbounded memo would
# grow with the audio's length; past this size it starts afresh
MEMO_LIMIT = 1 << 18


class CharNgramLM:
    def __init__(self, order: int, vocab_size: int, counts: Dict[Tuple[int, ...], Dict[int, int]]):
        if order < 1:
            raise ValueError(f"task.lm_order: expected >= 1 for a language model, received {order}")
        self.order, self.vocab_size = order, vocab_size
        self.counts = counts  # history tuple (up to order-1 labels) -> {next label: count}
        self.totals = {h: sum(nxt.values()) for h, nxt in counts.items()}
        self._memo: Dict[Tuple[Tuple[int, ...], int], float] = {}

    @classmethod
    def fit(cls, sequences: Iterable[Sequence[int]], order: int, vocab_size: int) -> "CharNgramLM":
        """Count every n-gram of order 1..``order`` in ``sequences`` (label ids, BOS-padded, EOS-ended)."""
        counts: Dict[Tuple[int, ...], Dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for seq in sequences:
            padded = [BOS] * (order - 1) + list(seq) + [EOS]
            for i in range(order - 1, len(padded)):
                for n in range(order):  # histories of 0 .. order-1 labels
                    counts[tuple(padded[i - n:i])][padded[i]] += 1
        return cls(order, vocab_size, {h: dict(nxt) for h, nxt in counts.items()})

    def _prob(self, history: Tuple[int, ...], label: int) -> float:
        key = (history, label)
        p = self._memo.get(key)
        if p is not None:
            return p
        # the next shorter history's estimate; below the unigram, uniform over the labels and the end mark
        lower = self._prob(history[1:], label) if history else 1.0 / (self.vocab_size + 1)
        nxt = self.counts.get(history)
        if nxt is None:  # a history never seen in training: back off entirely
            p = lower
        else:
            types = len(nxt)
            p = (nxt.get(label, 0) + types * lower) / (self.totals[history] + types)
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = p
        return p

    def _history(self, context: Sequence[int]) -> Tuple[int, ...]:
        n = self.order - 1
        if n == 0:
            return ()
        tail = list(context[-n:])
        return tuple([BOS] * (n - len(tail)) + tail)

    def log_prob(self, context: Sequence[int], label: int) -> float:
        """log P(``label`` | ``context``), the labels decoded so far (only the last order-1 matter)."""
        return math.log(self._prob(self._history(context), label))

    def log_prob_end(self, context: Sequence[int]) -> float:
        return math.log(self._prob(self._history(context), EOS))

    def sequence_log_prob(self, seq: Sequence[int]) -> float:
        """log P of a whole utterance, end mark included (tests: the probabilities sum to one)."""
        seq = list(seq)
        return sum(self.log_prob(seq[:i], c) for i, c in enumerate(seq)) + self.log_prob_end(seq)

    def perplexity(self, sequences: Iterable[Sequence[int]]) -> float:
        """Per-label perplexity (end marks counted as labels) of held-out ``sequences``."""
        total, n = 0.0, 0
        for seq in sequences:
            total += self.sequence_log_prob(seq)
            n += len(seq) + 1
        return math.exp(-total / max(n, 1))

