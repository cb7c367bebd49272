"""Translation data: the Ding-format dictionary extraction on a hand-made fixture, local parallel files
(jsonl / tsv / one sentence a line), their errors, and the subword model's round trip."""
from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT
from tasks.translation.data import (DICTIONARY_HINT, SAMPLE_PAIRS, load_files, load_pairs, prepare_dictionary,
                                     read_parallel_text, read_tsv)
from tasks.corpora.ding import clean_part, pairs_from_ding_line
from tasks.translation.schema import SubwordConfig
from tasks.translation.subwords import Subwords, train_subwords

FIX = ROOT / "tests" / "fixtures" / "translation"


def dictionary_config(tmp_path, **extra):
    cfg = {"source": "dictionary", "dictionary_path": str(FIX / "de-en.ding"), "cache_dir": str(tmp_path),
           "min_words": 5, "max_words": 30, "valid_size": 4, "test_size": 5, "split_seed": 1234}
    cfg.update(extra)
    return cfg


def test_ding_line_gives_aligned_sentence_pairs_without_annotations():
    line = ("Hund {m} [zool.] | Hunde {pl} | Der Hund (ein Dackel) schläft unter dem Tisch. :: "
            "dog | dogs | The dog sleeps under the table.")
    assert pairs_from_ding_line(line, 5) == [("Der Hund schläft unter dem Tisch.", "The dog sleeps under the table.")]
    assert clean_part("Aalreuse {f}; Aalkorb {m} <Aal-Korb> [Br.]") == "Aalreuse; Aalkorb"
    # equally many alternatives pair up one to one; a different number of parts is skipped, not guessed
    two = "Die Katze schläft auf dem Sofa.; Die Katze liegt auf dem Sofa. :: The cat is sleeping on the sofa.; The cat is lying on the sofa."
    assert [en for _, en in pairs_from_ding_line(two, 5)] == ["The cat is sleeping on the sofa.",
                                                              "The cat is lying on the sofa."]
    assert pairs_from_ding_line("a | Der Hund schläft unter dem Tisch. :: The dog sleeps under the table.", 5) == []
    assert pairs_from_ding_line("# Version :: devel", 1) == []


def test_dictionary_fixture_prepares_deterministic_disjoint_cached_splits(tmp_path, capsys):
    splits = prepare_dictionary(dictionary_config(tmp_path), tmp_path)
    assert "extracting sentence pairs" in capsys.readouterr().out
    assert {s: len(v) for s, v in splits.items()} == {"test": 5, "valid": 4, "train": 28}
    german = [p["de"] for s in splits.values() for p in s]
    assert len(german) == len(set(german))  # the duplicate German entry of the fixture was dropped
    assert all(len(p["de"].split()) >= 5 and len(p["en"].split()) >= 5 for s in splits.values() for p in s)
    assert not any("{" in p["de"] or "(" in p["en"] for s in splits.values() for p in s)
    again = prepare_dictionary(dictionary_config(tmp_path), tmp_path)  # from the cache, no extraction
    assert "extracting" not in capsys.readouterr().out and again == splits
    other = prepare_dictionary(dictionary_config(tmp_path / "b", split_seed=7), tmp_path / "b")
    assert other["test"] != splits["test"]  # the split follows its seed
    de_en = load_pairs(dictionary_config(tmp_path), ("de", "en"))
    assert de_en["train"][0] == splits["train"][0]  # either direction reads the same pairs


def test_missing_dictionary_says_which_package_to_install(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(DICTIONARY_HINT)):
        load_pairs(dictionary_config(tmp_path, dictionary_path=str(tmp_path / "nope")), ("en", "de"))
    assert DICTIONARY_HINT.startswith("apt-get install trans-de-en; or try the task now on the 8 sample pairs")
    # the sample is package data (a wheel has it), not a test fixture
    assert SAMPLE_PAIRS.is_file() and SAMPLE_PAIRS.relative_to(ROOT).parts[0] == "tasks"


def test_training_cap_keeps_a_fixed_random_subset_and_whole_evaluation_splits(tmp_path):
    full = load_pairs(dictionary_config(tmp_path), ("de", "en"))
    capped = load_pairs(dictionary_config(tmp_path, max_train_examples=10), ("de", "en"))
    assert len(capped["train"]) == 10 and capped["valid"] == full["valid"] and capped["test"] == full["test"]
    order = [full["train"].index(p) for p in capped["train"]]
    assert order == sorted(order) and order != list(range(10))  # a subset in corpus order, not the first ten
    assert load_pairs(dictionary_config(tmp_path, max_train_examples=10), ("de", "en")) == capped  # fixed
    assert load_pairs(dictionary_config(tmp_path, max_train_examples=999), ("de", "en")) == full


def test_mismatched_parallel_files_name_both_files_and_counts(tmp_path):
    (tmp_path / "train.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "train.de").write_text("eins\nzwei\n")
    with pytest.raises(ValueError) as err:
        read_parallel_text({"en": tmp_path / "train.en", "de": tmp_path / "train.de"})
    message = str(err.value)
    assert "train.en has 3 lines" in message and "train.de has 2 lines" in message
    with pytest.raises(ValueError, match="train.de has 2 lines"):  # the same through the prefix form
        load_files({"files": {"train": str(tmp_path / "train")}, "valid_size": 1, "test_size": 1,
                    "split_seed": 0}, ("en", "de"))


def test_local_files_jsonl_tsv_and_text_agree(tmp_path):
    pairs = [json.loads(line) for line in SAMPLE_PAIRS.read_text(encoding="utf-8").splitlines()]
    (tmp_path / "p.tsv").write_text("de\ten\n" + "".join(f"{p['de']}\t{p['en']}\n" for p in pairs), encoding="utf-8")
    (tmp_path / "p.en").write_text("".join(p["en"] + "\n" for p in pairs), encoding="utf-8")
    (tmp_path / "p.de").write_text("".join(p["de"] + "\n" for p in pairs), encoding="utf-8")
    for spec in (str(SAMPLE_PAIRS), str(tmp_path / "p.tsv"), str(tmp_path / "p"),
                 {"en": str(tmp_path / "p.en"), "de": str(tmp_path / "p.de")}):
        got = load_files({"files": {"train": spec, "valid": spec, "test": spec}, "valid_size": 1, "test_size": 1,
                          "split_seed": 0}, ("en", "de"))
        assert got["train"] == got["test"] == [{"en": p["en"], "de": p["de"]} for p in pairs]
    carved = load_files({"files": {"train": str(SAMPLE_PAIRS)}, "valid_size": 2, "test_size": 3,
                         "split_seed": 0}, ("en", "de"))
    assert [len(carved[s]) for s in ("train", "valid", "test")] == [3, 2, 3]
    (tmp_path / "bad.tsv").write_text("source\ttarget\na\tb\n")
    with pytest.raises(ValueError, match="bad.tsv: the header row"):
        read_tsv(tmp_path / "bad.tsv", ("en", "de"))


def test_subword_round_trip_and_saved_model(tmp_path):
    splits = prepare_dictionary(dictionary_config(tmp_path), tmp_path)
    sentences = [p[lang] for p in splits["train"] for lang in ("en", "de")]
    cfg = SubwordConfig(model_type="bpe", vocab_size=400, character_coverage=1.0, max_sentences=10000)
    sw = train_subwords(sentences, cfg, tmp_path)
    assert sw.vocabulary.itos[:4] == ["<pad>", "<unk>", "<s>", "</s>"] and len(sw) <= 400
    for text in sentences + [p["de"] for p in splits["test"]]:
        ids = sw.encode(text)
        assert min(ids) >= 4  # byte fallback: never <unk>, even for letters unseen in training
        assert sw.decode(ids + [sw.vocabulary.eos_id, 7, 8]) == text  # decoding stops at </s>
    cached = train_subwords(sentences, cfg, tmp_path)  # same data and settings: the cached model
    assert cached.model_proto == sw.model_proto
    sw.save(tmp_path / "spm.model")
    assert Subwords.load(tmp_path / "spm.model").encode(sentences[0]) == sw.encode(sentences[0])
    assert Subwords(sw.model_proto).vocabulary.itos == sw.vocabulary.itos  # what the checkpoint carries
