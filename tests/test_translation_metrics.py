"""BLEU and chrF from summed sufficient statistics equal sacreBLEU's corpus scores on the same text,
however the corpus is cut into batches / DDP ranks."""
from __future__ import annotations

import random

import pytest
import sacrebleu

from tasks.engine.base import sum_logging_outputs
from tasks.translation.metrics import bleu_from_statistics, chrf_from_statistics, signatures, translation_statistics

REFS = ["Das Haus ist sehr alt.", "Der Hund schläft unter dem Tisch.", "Die Katze trinkt gern warme Milch.",
        "Ich lese jeden Abend ein Buch.", "Der Zug kommt heute später an.", "Das Wetter ist heute schön.",
        "Im Garten blühen viele rote Blumen.", "Bitte mach das Fenster zu."]


def noisy(refs, seed):
    """Hypotheses with dropped, repeated and swapped words (and one empty line): partial n-gram matches."""
    rng = random.Random(seed)
    hyps = []
    for r in refs:
        words = r.split()
        rng.shuffle(words) if rng.random() < 0.3 else None
        words = [w for w in words if rng.random() > 0.2] + (["Haus"] if rng.random() < 0.3 else [])
        hyps.append(" ".join(words))
    hyps[3] = ""
    return hyps


@pytest.mark.parametrize("cuts", [[8], [3, 5], [1, 1, 2, 4]])
def test_summed_statistics_equal_corpus_bleu_and_chrf(cuts):
    hyps = noisy(REFS, seed=len(cuts))
    outputs, start = [], 0
    for n in cuts:  # as evaluation batches / DDP ranks would cut the corpus
        outputs.append(translation_statistics(hyps[start:start + n], REFS[start:start + n]))
        start += n
    summed = sum_logging_outputs(outputs)
    expected = sacrebleu.corpus_bleu(hyps, [REFS])
    bleu = bleu_from_statistics(summed)
    assert bleu.score == pytest.approx(expected.score, abs=1e-9) and 0.0 < bleu.score < 100.0
    assert bleu.bp == pytest.approx(expected.bp)
    assert chrf_from_statistics(summed) == pytest.approx(sacrebleu.corpus_chrf(hyps, [REFS]).score, abs=1e-9)


def test_smoothing_matches_corpus_bleu_when_a_higher_order_has_no_match():
    hyps, refs = ["Das Haus alt ist"], ["Das Haus ist alt"]  # no 3-/4-gram match: only smoothing keeps BLEU > 0
    bleu = bleu_from_statistics(translation_statistics(hyps, refs))
    assert bleu.score == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score) and bleu.score > 0.0


def test_signatures_name_the_tokeniser_and_perfect_output_scores_100():
    assert "tok:13a" in signatures()["bleu"] and "smooth:exp" in signatures()["bleu"]
    assert bleu_from_statistics(translation_statistics(REFS, REFS)).score == pytest.approx(100.0)
    with pytest.raises(ValueError, match="3 hypotheses for 2 references"):
        translation_statistics(["a", "b", "c"], ["a", "b"])
