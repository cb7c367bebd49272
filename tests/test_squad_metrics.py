"""SQuAD v1.1 EM/F1 on hand-computed cases (normalisation corners), span decoding, baselines, and the
metrics against the independent oracle (tests/squad_oracle.py)."""
from __future__ import annotations

import pytest
import torch

from squad_oracle import oracle_em, oracle_f1
from tasks.squad.metrics import (decode_spans, exact_match, f1, first_of_type, normalize_answer, question_type,
                                 random_span, reduce_squad, score)


@pytest.mark.parametrize("text, expected", [
    ("The  Limmat.", "limmat"),            # article, punctuation, case, whitespace
    ("an apple a day", "apple day"),
    ("A.B.C. (Zürich)", "abc zürich"),     # punctuation removed inside tokens; non-ASCII letters kept
    ("theatre", "theatre"),               # "the" only as a whole word
    ("  \tthe\n", ""),
    ("rock-'n'-roll", "rocknroll"),
])
def test_normalize_answer_corners(text, expected):
    assert normalize_answer(text) == expected


def test_f1_and_em_hand_computed():
    # pred tokens {river, limmat, flows}, gold {limmat, river}: overlap 2, P = 2/3, R = 1 -> F1 = 0.8
    assert f1("the river Limmat flows", "Limmat river") == pytest.approx(0.8)
    assert exact_match("the river Limmat flows", "Limmat river") == 0.0
    assert exact_match("The Limmat!", "limmat") == 1.0
    # repeated tokens count once per gold occurrence: overlap 1, P = 1/2, R = 1 -> 2/3
    assert f1("Limmat Limmat", "Limmat") == pytest.approx(2 / 3)
    # v1.1: an answer that normalises to nothing matches exactly (EM 1) but has F1 0
    assert exact_match("the", "a") == 1.0 and f1("the", "a") == 0.0
    assert f1("1896", "1895") == 0.0
    # the max over gold answers, separately for EM and F1
    em, f = score("river Limmat", ["The river Limmat flows", "Limmat"])
    assert em == 0.0 and f == pytest.approx(max(2 * 2 / (2 + 3), 2 * 1 / (2 + 1)))
    assert score("Limmat", ["the river", "the Limmat"]) == (1.0, 1.0)


def test_metrics_agree_with_the_independent_oracle():
    cases = [("The  Limmat.", "limmat"), ("river Limmat flows", "the Limmat river"), ("a", "an"),
             ("415,367 residents", "415367"), ("Ελλάδα", "ελλάδα"), ("x y z", "z y x w"), ("", "Zürich")]
    for pred, gold in cases:
        assert exact_match(pred, gold) == oracle_em(pred, gold), (pred, gold)
        assert f1(pred, gold) == pytest.approx(oracle_f1(pred, gold)), (pred, gold)


def test_corpus_scores_are_reduced_from_sums():
    # two "ranks" holding 3 and 1 questions: 100 * (2 + 1) / 4, not the mean of the two ranks' EMs
    summed = {"em": 2.0 + 1.0, "f1": 2.5 + 1.0, "n": 3.0 + 1.0}
    assert reduce_squad(summed) == {"em": 75.0, "f1": 87.5}


def test_decode_spans_respects_order_length_and_padding():
    start = torch.tensor([[0.0, 5.0, 0.0, 0.0, 9.0],      # best start at 4 is padding
                          [0.0, 0.0, 0.0, 0.0, 0.0]])
    end = torch.tensor([[6.0, 0.0, 0.0, 4.0, 9.0],        # end 0 would precede start 1
                        [0.0, 0.0, 0.0, 0.0, 8.0]])
    mask = torch.tensor([[False, False, False, False, True], [False] * 5])
    s, e = decode_spans(start, end, mask, max_len=15)
    assert (s.tolist(), e.tolist()) == ([1, 0], [3, 4])
    s, e = decode_spans(start, end, mask, max_len=2)      # span 1..3 is 3 tokens: too long now
    assert int(e[0]) - int(s[0]) < 2 and int(s[0]) <= int(e[0])
    assert int(e[1]) - int(s[1]) < 2 and int(e[1]) == 4


def test_question_types_and_baselines():
    ctx = "Athens hosted the games in 1896 and again in 2004, with 10,500 athletes from Greece."
    assert question_type("In what year did Athens host the games?") == "year"
    assert question_type("Who hosted the games in 1896?") == "name"
    assert question_type("How many athletes took part?") == "number"
    assert question_type("When did Athens host the games?") == "date"
    assert first_of_type(ctx, "In what year did Athens host the games?") == "1896"
    assert first_of_type(ctx, "How many athletes took part?") == "10,500"
    assert first_of_type(ctx, "When did Athens host the games again?") == "1896"  # no date: a year answers
    spans = [(0, 6), (7, 13), (14, 17)]
    a, b = random_span(spans, ctx, "q1"), random_span(spans, ctx, "q1")
    assert a == b and a in ctx  # seeded per question, a substring of the context


def test_span_decoding_stays_inside_one_sentence():
    """With sentence_ends, the best span never holds a sentence's final punctuation; abbreviations and
    initials ("St.", "U.S.") do not end a sentence."""
    from tasks.squad.data import tokenize
    from tasks.squad.features import sentence_ends
    from tasks.squad.metrics import decode_spans
    words = tokenize("She was born in Warsaw in 1867. She moved to St. Louis in the U.S. to study.")[0]
    ends = sentence_ends(words)
    assert [w for w, e in zip(words, ends) if e] == [".", "."] and ends[7] and ends[-1]
    start = torch.full((1, len(words)), -5.0)
    end = torch.full((1, len(words)), -5.0)
    start[0, 4], end[0, 13] = 5.0, 5.0  # "Warsaw ... St. Louis": the best span crosses the first sentence's end
    pad = torch.zeros(1, len(words), dtype=torch.bool)
    assert decode_spans(start, end, pad, 15)[0].item() == 4 and decode_spans(start, end, pad, 15)[1].item() == 13
    s, e = decode_spans(start, end, pad, 15, torch.tensor([ends]))
    assert not any(ends[int(s):int(e) + 1])
    assert int(s) == 4 or int(e) == 13  # one end of the best span is kept


def test_a_short_name_ends_its_sentence_and_an_initial_does_not():
    from tasks.squad.data import tokenize
    from tasks.squad.features import sentence_ends
    words = tokenize("Tokyo was known as Edo. It grew. J. S. Bach met Mr. Smith in Ulm. Then the U.S. Army came.")[0]
    assert [words[k - 1] for k, end in enumerate(sentence_ends(words)) if end] == ["Edo", "grew", "Ulm", "came"]


def test_batches_mark_sentence_ends_from_the_text_as_written():
    """The lower-cased vocabulary keys lose the capital after a sentence end; the batch's marks come from the
    context itself (a lower-casing run once marked none)."""
    from tasks.squad.data import SquadExample
    from tasks.squad.features import collate, encode_split
    from tasks.common.text import Vocabulary
    context = "The Danube is a river. It rises in Germany."
    ex = SquadExample("q1", "t", context, "Where does the Danube rise?", ["Germany"], [context.index("Germany")])
    encoded = encode_split([ex], lowercase=True)
    vocab = Vocabulary.build([encoded[0].context_words, encoded[0].question_words])
    batch = collate([encoded[0].with_ids(vocab)], [0], vocab.pad_id)
    assert batch["sentence_end"].tolist() == [[False] * 5 + [True] + [False] * 4 + [True]]


def test_answer_type_prior_moves_the_span_to_the_asked_type_only_where_the_paragraph_has_one():
    # "How high is Mount Everest?": the reader prefers "highest" (token 1) a little over "8,849 metres" (3..4)
    start = torch.tensor([[0.0, 2.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 1.0, 0.0]])
    end = torch.tensor([[0.0, 2.0, 0.0, 0.0, 1.0], [0.0, 2.0, 0.0, 0.0, 1.0]])
    pad = torch.zeros(2, 5, dtype=torch.bool)
    match = torch.tensor([[False, False, False, True, True], [False] * 5])  # the second paragraph has no measure
    s, e = decode_spans(start, end, pad, 15, type_match=match, type_prior=0.0)
    assert s.tolist() == [1, 1] and e.tolist() == [1, 1]
    s, e = decode_spans(start, end, pad, 15, type_match=match, type_prior=2.0)
    assert s.tolist() == [3, 1] and e.tolist() == [4, 1]  # the typed span wins; no type in the paragraph: as before
