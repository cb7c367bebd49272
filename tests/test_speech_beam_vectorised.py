"""The vectorised prefix beam search (tasks/speech/decoding.py) gives exactly the transcripts of the scalar
search it replaced (tests/speech_reference_decoder.py): random frames, beams, LMs, weights, bonuses and
pruning thresholds, ties included (log-probabilities rounded to halves)."""
import random

import pytest
import torch

from speech_reference_decoder import reference_prefix_beam_search, reference_scored_beam_search
from tasks.speech.char_lm import CharNgramLM
from tasks.speech.decoding import prefix_beam_search, scored_beam_search


def _case(seed: int):
    rng = random.Random(seed)
    labels, steps = rng.choice([2, 3, 5, 8, 30]), rng.choice([0, 1, 2, 10, 40])
    g = torch.Generator().manual_seed(seed)
    log_probs = (rng.choice([0.5, 1.0, 3.0, 8.0]) * torch.randn(steps, labels, generator=g)).log_softmax(-1)
    if rng.random() < 0.3:  # equal scores: the order in which prefixes were first met breaks the tie
        log_probs = torch.round(log_probs * 2) / 2
    text = [[rng.randrange(1, labels) for _ in range(rng.randrange(1, 12))] for _ in range(20)]
    lm = CharNgramLM.fit(text, rng.choice([1, 2, 3, 6]), labels) if rng.random() < 0.8 else None
    # lm_weight >= 0 as task.lm_weight and predict.py's lm_weight= require (a negative weight has no bound
    # for the search to sort by: the scalar search then sorted NaN bounds in an arbitrary order)
    options = dict(beam=rng.choice([1, 2, 4, 8, 16]), lm=lm, lm_weight=rng.choice([0.0, 0.5, 1.0, 3.0]),
                   bonus=rng.choice([0.0, 0.5, 2.0]), prune=rng.choice([-12.0, -2.0, -1.0]))
    if rng.random() < 0.3:  # one language's alphabet: only these labels may be written
        options["allowed"] = set(rng.sample(range(1, labels), rng.randrange(0, labels))) if labels > 1 else set()
    return log_probs, options


@pytest.mark.parametrize("first", range(0, 400, 50))
def test_the_vectorised_search_decodes_exactly_as_the_scalar_one(first):
    for seed in range(first, first + 50):
        log_probs, options = _case(seed)
        assert scored_beam_search(log_probs, **options) == reference_scored_beam_search(log_probs, **options), seed


def test_an_untrained_models_frames_decode_alike_and_the_lm_is_asked_less():
    """Frames with no clear winner (every label tried at every step, as an untrained model's): same output,
    and the LM is asked once per (live prefix, label), not again at every frame the prefix stays live."""
    g = torch.Generator().manual_seed(7)
    log_probs = torch.randn(200, 30, generator=g).log_softmax(-1)
    text = [[(3 * i + j) % 29 + 1 for j in range(10)] for i in range(40)]
    calls = []

    def counted(lm):
        ask = lm.log_prob
        lm.log_prob = lambda *a: calls.append(1) or ask(*a)
        return lm

    new = prefix_beam_search(log_probs, beam=8, lm=counted(CharNgramLM.fit(text, 8, 30)), lm_weight=0.5, bonus=1.0)
    asked_new, calls[:] = len(calls), []
    old = reference_prefix_beam_search(log_probs, beam=8, lm=counted(CharNgramLM.fit(text, 8, 30)), lm_weight=0.5,
                                       bonus=1.0)
    assert new == old and asked_new < len(calls) / 3, (asked_new, len(calls))
