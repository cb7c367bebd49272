"""Numbers through translation: placeholders before subword encoding and back after decoding
(tasks/translation/numbers.py), the subword model's placeholder pieces, and the number check's scorer
(tasks/translation/check_sets.py) on the project's own check sets."""
from __future__ import annotations

import re

import pytest

from tasks.translation.check_sets import CHECKS, carried, main, read_check_set, score, source_numbers
from tasks.translation.numbers import (MAX_PLACEHOLDERS, PLACEHOLDERS, german_word, mask_pair, mask_source,
                                       restore)
from tasks.translation.schema import SubwordConfig
from tasks.translation.subwords import train_subwords

PAIRS = [("Every five minutes, at 10:30 on March 5th, 2024.", "Alle fünf Minuten, um 10:30 am 5. März 2024."),
         ("Twenty-five people and 3.5 kg of flour", "Fünfundzwanzig Leute und 3,5 kg Mehl"),
         ("Select 2 of 10 items on page 10.", "Wählen Sie 2 von 10 Elementen auf Seite 10 aus."),
         ("Insert two hundred rows.", "Fügen Sie zweihundert Zeilen ein.")]


@pytest.mark.parametrize("en,de", PAIRS)
def test_masked_target_restores_to_the_reference(en, de):
    source, target = mask_pair(en, de, "en", "de")
    assert not any(ch.isdigit() for ch in re.sub(r"<n\d>", "", source))   # every digit masked
    _, numbers = mask_source(en, "en")
    assert restore(target, numbers, "de") == de   # round trip: placeholders -> the source's numbers


def test_placeholders_follow_the_source_order_and_repeated_values():
    source, target = mask_pair("Select 2 of 10 items on page 10.", "Seite 10: 2 von 10", "en", "de")
    assert source == "Select <n0> of <n1> items on page <n2>."
    assert target == "Seite <n1>: <n0> von <n2>"   # the first unused source number of the same value


def test_restore_writes_words_in_german_and_drops_invented_and_repeated_placeholders():
    _, numbers = mask_source("forty-five minutes and 7 days", "en")
    assert restore("Nach <n0> Minuten und <n1> Tagen <n5>", numbers, "de") == "Nach fünfundvierzig Minuten und 7 Tagen"
    assert restore("<n0> Minuten", numbers, "de") == "Fünfundvierzig Minuten"   # the sentence's first word
    assert restore("um <n1>:<n1><n1> Uhr", numbers, "de") == "um 7: Uhr"   # a repeated placeholder is a stutter
    assert [german_word(v) for v in (21, 30, 101, 2500)] == ["einundzwanzig", "dreißig", "einhunderteins",
                                                              "zweitausendfünfhundert"]


def test_one_and_ordinal_words_stay_text_and_at_most_ten_numbers_are_masked():
    assert mask_source("the first one", "en") == ("the first one", [])
    masked, numbers = mask_source(" ".join(str(i) for i in range(12)), "en")
    assert len(numbers) == MAX_PLACEHOLDERS and masked.endswith("<n9> 10 11")


def test_subword_model_keeps_each_placeholder_one_piece(tmp_path):
    sentences = [mask_pair(en, de, "en", "de")[k] for en, de in PAIRS for k in (0, 1)] * 20
    cfg = SubwordConfig(model_type="unigram", vocab_size=320, character_coverage=1.0, max_sentences=1000)
    with_symbols = train_subwords(sentences, cfg, tmp_path, symbols=PLACEHOLDERS)
    assert with_symbols.has_placeholders
    ids = with_symbols.encode("Alle <n0> Minuten, <n9>")
    assert with_symbols.vocabulary.stoi["<n0>"] in ids and with_symbols.decode(ids) == "Alle <n0> Minuten, <n9>"
    plain = train_subwords([en for en, _ in PAIRS] * 20, cfg, tmp_path)
    assert not plain.has_placeholders   # an older model: numbers stay text


def test_scorer_counts_digits_words_ordinals_and_multiplicatives():
    assert source_numbers("the 3rd time at 10:30, five days, the fifth floor, one cat") == [3, 10, 30, 5, 5]
    assert carried("He lives on the fifth floor at 10:30.", "Er wohnt im fünften Stock um 10:30.") == (3, 3)
    assert carried("Click three times on 2 buttons.", "Klicken Sie dreimal auf 2 Schaltflächen.") == (2, 2)
    assert carried("five and five", "fünf") == (1, 2)   # each occurrence needs its own
    assert carried("No numbers here.", "Keine Zahlen.") == (0, 0)


def test_number_check_set_is_large_enough_and_its_references_carry_every_number(tmp_path, capsys):
    rows = read_check_set(CHECKS / "numbers.tsv")
    assert len(rows) >= 50 and {r["domain"] for r in rows} == {"help", "everyday"}
    perfect = score(rows, [r["de"] for r in rows])
    assert perfect["all"]["carried_share"] == 1.0 and perfect["all"]["numbers"] >= 60
    dropped = [" ".join(w for w in r["de"].split() if not any(c.isdigit() for c in w)) for r in rows]
    assert score(rows, dropped)["all"]["carried_share"] < 0.7
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("\n".join(r["de"] for r in rows) + "\n", encoding="utf-8")
    main([str(CHECKS / "numbers.tsv"), str(hyp)])
    assert "numbers carried 80/80 (100.0%)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="translations for 60 check sentences"):
        score(rows, ["x"])


@pytest.mark.parametrize("name", ["everyday.tsv", "help.tsv"])
def test_other_check_sets_read(name):
    rows = read_check_set(CHECKS / name)
    assert len(rows) >= 20 and all(r["en"] and r["de"] for r in rows)


NUMBER_PAIRS = [{"en": "I have 3 apples.", "de": "Ich habe 3 Äpfel."},
                {"en": "The train leaves at 7:45.", "de": "Der Zug fährt um 7:45 ab."},
                {"en": "We waited five minutes.", "de": "Wir warteten fünf Minuten."}]


@pytest.mark.slow
def test_a_trained_model_carries_numbers_it_never_saw(run_train, tmp_path):
    """Memorised pairs with numbers: new numbers in the same sentences come out through predict.py's path."""
    import json

    from conftest import ROOT
    from tasks.engine.inference.predict_cmd import load_predictor
    from test_translation_e2e import tiny_translation_overrides

    pairs = tmp_path / "pairs.jsonl"
    sample = (ROOT / "tasks" / "translation" / "sample_pairs.jsonl").read_text(encoding="utf-8")
    pairs.write_text(sample + "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in NUMBER_PAIRS * 3),
                     encoding="utf-8")
    overrides = [o.replace(str(ROOT / "tasks" / "translation" / "sample_pairs.jsonl"), str(pairs))
                 for o in tiny_translation_overrides("transformer", tmp_path / "cache", steps=200)]
    run_train(overrides + ["trainer.eval_every_steps=200"], tmp_path / "run")
    out = load_predictor(tmp_path / "run", beam=1).predict(["I have 912 apples.", "The train leaves at 11:20.",
                                                            "We waited twenty minutes."])
    assert out == ["Ich habe 912 Äpfel.", "Der Zug fährt um 11:20 ab.", "Wir warteten zwanzig Minuten."]
