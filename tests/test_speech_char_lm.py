"""The character n-gram LM (tasks/speech/char_lm.py) and its shallow fusion into CTC prefix beam search."""
import math
from itertools import product

import pytest
import torch

from tasks.speech.char_lm import CharNgramLM
from tasks.speech.decoding import prefix_beam_search

V = 5  # labels 0..4 (0 = blank, never in a transcript)
TRAIN = [[1, 2, 3], [1, 2, 4], [1, 2, 3, 3], [2, 3]]


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_next_label_probabilities_sum_to_one_after_any_context(order):
    lm = CharNgramLM.fit(TRAIN, order=order, vocab_size=V)
    for context in ([], [1], [1, 2], [4, 4, 4], [2, 3, 3, 1]):  # seen and unseen histories
        total = sum(math.exp(lm.log_prob(context, c)) for c in range(V)) + math.exp(lm.log_prob_end(context))
        assert total == pytest.approx(1.0, abs=1e-12)


def test_whole_utterance_probabilities_sum_to_at_most_one():
    # every sequence of length <= 3 over labels 1..4, end mark included: a proper distribution sums to < 1
    lm = CharNgramLM.fit(TRAIN, order=3, vocab_size=V)
    total = sum(math.exp(lm.sequence_log_prob(seq)) for n in range(4) for seq in product(range(1, V), repeat=n))
    assert 0.5 < total < 1.0


def test_witten_bell_estimate_by_hand():
    # bigram after label 1: seen twice, always followed by 2 (one type): P(2|1) = (2 + 1 * P_uni(2)) / (2 + 1)
    lm = CharNgramLM.fit([[1, 2], [1, 2]], order=2, vocab_size=V)
    # unigram counts: 1:2, 2:2, end:2 (6 tokens, 3 types); floor 1/(V+1)
    p_uni_2 = (2 + 3 / (V + 1)) / (6 + 3)
    assert math.exp(lm.log_prob([1], 2)) == pytest.approx((2 + p_uni_2) / 3)
    assert lm.log_prob([1], 2) > lm.log_prob([1], 3)  # the seen continuation is the likely one


def test_higher_orders_fit_the_training_text_better_and_context_helps_held_out_text():
    text = [[1, 2, 3, 4] * 3, [2, 3, 4, 1] * 2, [1, 2, 3, 4, 1, 2]]
    train_ppl = [CharNgramLM.fit(text, order=n, vocab_size=V).perplexity(text) for n in (1, 2, 3, 4)]
    assert train_ppl == sorted(train_ppl, reverse=True) and train_ppl[0] > 2 * train_ppl[-1]
    held_out = [[1, 2, 3, 4, 1, 2, 3, 4]]
    assert (CharNgramLM.fit(text, order=2, vocab_size=V).perplexity(held_out)
            < CharNgramLM.fit(text, order=1, vocab_size=V).perplexity(held_out))


def _ambiguous_frames():
    # 3 frames: the acoustics slightly prefer label 4 over label 3 after "1 2"
    probs = torch.full((3, V), 0.01)
    probs[0, 1], probs[1, 2] = 0.96, 0.96
    probs[2, 4], probs[2, 3] = 0.50, 0.46
    return (probs / probs.sum(-1, keepdim=True)).log()


def test_fusion_lets_the_lm_overrule_weak_acoustic_evidence():
    lp = _ambiguous_frames()
    assert prefix_beam_search(lp, beam=4) == [1, 2, 4]
    lm = CharNgramLM.fit([[1, 2, 3]] * 20, order=3, vocab_size=V)  # "1 2" is always followed by 3
    assert prefix_beam_search(lp, beam=4, lm=lm, lm_weight=1.0) == [1, 2, 3]
    # weight 0 and no bonus: the LM is ignored
    assert prefix_beam_search(lp, beam=4, lm=lm, lm_weight=0.0) == [1, 2, 4]


def test_insertion_bonus_lengthens_output():
    # frame 2 is mostly blank: without a bonus the label there is dropped, a large bonus keeps it
    probs = torch.full((3, V), 0.01)
    probs[0, 1], probs[1, 2] = 0.96, 0.96
    probs[2, 0], probs[2, 3] = 0.60, 0.37
    lp = (probs / probs.sum(-1, keepdim=True)).log()
    assert prefix_beam_search(lp, beam=4) == [1, 2]
    assert prefix_beam_search(lp, beam=4, bonus=2.0) == [1, 2, 3]


# ---- bounded state over long audio: a file is decoded window by window with one LM for all windows ----------

def _noisy_frames(steps: int, seed: int) -> torch.Tensor:
    """Frames with no clear winner (an untrained model's): every label is tried at every step."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(steps, V, generator=g).log_softmax(-1)


def test_the_lm_memo_stays_bounded_over_many_windows(monkeypatch):
    import tasks.speech.char_lm as char_lm

    monkeypatch.setattr(char_lm, "MEMO_LIMIT", 300, raising=False)  # absent: unbounded
    lm = CharNgramLM.fit(TRAIN, order=6, vocab_size=V)
    sizes = []
    for window in range(12):  # each window brings new histories; the memo must not keep them all
        prefix_beam_search(_noisy_frames(60, window), beam=8, lm=lm, lm_weight=0.5, bonus=0.5)
        sizes.append(len(lm._memo))
    assert max(sizes) <= 300, sizes


def test_the_beam_keeps_no_scores_of_dropped_prefixes():
    """Peak memory of one utterance grows with its length, not with length x frames (the fusion scores of
    every prefix ever tried, kept to the end, made a 4x longer utterance take ~16x the memory)."""
    import tracemalloc

    lm = CharNgramLM.fit(TRAIN, order=3, vocab_size=V)

    def peak(steps: int) -> int:
        frames = _noisy_frames(steps, 0)
        tracemalloc.start()
        prefix_beam_search(frames, beam=8, lm=lm, lm_weight=0.5, bonus=0.5)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    short, long = peak(100), peak(400)
    assert long < 7 * short, (short, long)


@pytest.mark.parametrize("seed, expected", [(0, [2, 3, 4, 2, 4, 1, 2, 3]), (1, [2, 3, 2, 4, 1, 2, 3, 1, 2, 3, 3]),
                                            (2, [1, 2, 3, 1, 2, 3, 1, 2, 4]), (3, [1, 2, 4, 1, 2, 4, 1, 2, 3])])
def test_the_fusion_scores_kept_per_live_prefix_decode_as_before(seed, expected):
    """The outputs of the search that kept every prefix's fusion score (each from the whole prefix)."""
    lm = CharNgramLM.fit(TRAIN, order=3, vocab_size=V)
    assert prefix_beam_search(_noisy_frames(30, seed), beam=8, lm=lm, lm_weight=0.7, bonus=0.3) == expected


@pytest.mark.parametrize("beam", [0, 129, 1000])
def test_a_beam_outside_the_limit_is_refused_in_one_line(beam):
    from tasks.speech.decoding import MAX_BEAM

    with pytest.raises(ValueError, match=rf"task.beam_size: expected an integer from 1 to {MAX_BEAM}, received {beam}$"):
        prefix_beam_search(_noisy_frames(5, 0), beam=beam)


def test_the_command_line_limit_is_the_decoders():
    from tasks.engine.inference.options import SPEECH_MAX_BEAM
    from tasks.speech.decoding import MAX_BEAM

    assert SPEECH_MAX_BEAM == MAX_BEAM
