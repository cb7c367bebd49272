"""End-to-end language modeling on the tiny fixture, plus the LM data pipeline's contracts."""
from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import LM_FIXTURE, compose, tiny_lm_overrides, typed_data

from tasks.common.text import Vocabulary
from tasks.engine.run_metrics import read_metrics
from tasks.lm.data import batchify, num_windows, tokenize, window
from tasks.lm.schema import LMDataConfig


def lm_data(**overrides) -> LMDataConfig:
    """The typed ``task.data`` section of task=lm with ``overrides`` (the readers take the typed section)."""
    return typed_data("lm", LMDataConfig, **overrides)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["sru", "lstm"])
def test_tiny_lm_trains_end_to_end(model, run_train, tmp_path):
    summary = run_train(tiny_lm_overrides(model, steps=24) + ["trainer.plot=true"], tmp_path)
    train = read_metrics(tmp_path, "train")
    valid = read_metrics(tmp_path, "valid")
    losses = [r["loss"] for r in train]
    assert len(losses) == 24 and all(math.isfinite(x) for x in losses)
    # Loss falls: the last steps average well below the first ones (grammar fixture is learnable).
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.5
    assert [r["step"] for r in valid] == [4, 8, 12, 16, 20, 24]
    assert valid[-1]["ppl"] < valid[0]["ppl"]
    assert summary["best_valid"] == min(r["ppl"] for r in valid)
    assert math.isclose(summary["test"]["ppl"], math.exp(summary["test"]["loss"]), rel_tol=1e-6)
    for name in ("checkpoints/last.pt", "checkpoints/best.pt", "metrics_train.csv", "curves.png"):
        assert (tmp_path / name).is_file(), name
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == 24


def test_perplexity_is_token_weighted():
    from tasks.lm.task import LanguageModelingTask
    task = LanguageModelingTask(compose(tiny_lm_overrides()))
    # Two batches with different token counts: mean of per-batch losses would be (1 + 3) / 2 = 2.
    summed = {"loss_sum": 1.0 * 10 + 3.0 * 30, "ntokens": 40}
    metrics = task.reduce_metrics(summed)
    assert metrics["loss"] == pytest.approx(2.5)
    assert metrics["ppl"] == pytest.approx(math.exp(2.5))
    assert metrics["bpc"] == pytest.approx(2.5 / math.log(2))


def test_vocabulary_batchify_and_windows():
    tokens = tokenize(" a b a \n\n c a \n", "word")
    assert tokens == ["a", "b", "a", "<eos>", "c", "a", "<eos>"]
    vocab = Vocabulary.build([tokens], specials=("<unk>", "<eos>"))
    assert vocab.itos == ["<unk>", "<eos>", "a", "b", "c"]  # specials, then by frequency, ties a-z
    assert vocab.encode(["zzz"]) == [vocab.unk_id] == [0]
    stream = batchify(torch.arange(23), 2)  # (11, 2): two contiguous streams, ragged tail dropped
    assert stream[:, 0].tolist() == list(range(11)) and stream[:, 1].tolist() == list(range(11, 22))
    assert num_windows(stream, 4) == 3
    last = window(stream, 2, 4)  # shorter final window; targets are inputs shifted by one
    assert last["input"][:, 0].tolist() == [8, 9] and last["target"][:, 0].tolist() == [9, 10]


def test_char_level_tokenizes_every_character():
    assert tokenize("ab \nc", "char") == ["a", "b", " ", "\n", "c"]


def test_missing_data_file_names_path_and_fix(tmp_path):
    from tasks.engine.base import build_task
    missing = tmp_path / "nope" / "train.txt"
    cfg = compose(tiny_lm_overrides() + [f"task.data.train_file={missing}"])
    task = build_task(cfg)
    with pytest.raises(FileNotFoundError) as err:
        task.setup()
    assert str(missing) in str(err.value) and "task.data.source=ptb" in str(err.value)


def test_lm_state_is_carried_and_detached():
    from tasks.engine.base import build_task
    task = build_task(compose(tiny_lm_overrides("lstm")))
    task.setup()
    model = task.build_model()
    batches = task.batches("train")
    loss, _ = task.compute_loss(model, next(batches), "train")
    h, c = task.states["train"]
    assert not h.requires_grad and h.shape == (2, 4, 32)
    task.compute_loss(model, next(batches), "train")
    assert not torch.equal(task.states["train"][0], h)   # the state moves on
    next(task.batches("train", start=0))                  # a new pass starts from zero state
    assert "train" not in task.states


def test_gensim_wikipedia_sample_splits_90_5_5():
    from tasks.lm.data import load_texts
    texts = load_texts(lm_data(source="gensim_wiki", split_fractions=[0.9, 0.05, 0.05]))
    total = sum(len(t) for t in texts.values())
    assert total > 5_000_000 and texts["train"].startswith("<mediawiki")
    assert abs(len(texts["valid"]) / total - 0.05) < 1e-3


def test_bad_split_fractions_and_source_are_named():
    from tasks.lm.data import load_texts, split_by_fractions
    with pytest.raises(ValueError, match="summing to 1"):
        split_by_fractions("abc", [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match=r"expected one of \['ptb', 'files'"):
        load_texts(lm_data(source="wikipedia"))


def test_hugging_face_loader_reads_local_text_builder(monkeypatch, tmp_path):
    # The hub path, offline: the `datasets` "text" builder on the fixture files.
    from tasks.lm.data import load_texts, read_text
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    files = {"train": str(LM_FIXTURE / "train.txt"), "validation": str(LM_FIXTURE / "valid.txt"),
             "test": str(LM_FIXTURE / "test.txt")}
    texts = load_texts(lm_data(source="hf", hf_name="text", hf_config=None, hf_data_files=files, text_field="text"))
    for split, name in (("train", "train"), ("valid", "valid"), ("test", "test")):
        assert tokenize(texts[split], "word") == tokenize(read_text(LM_FIXTURE / f"{name}.txt"), "word")


@pytest.mark.slow
@pytest.mark.parametrize("flush", [True, False])
def test_trainer_flush_denormal_sets_how_subnormal_floats_are_computed(flush, run_train, tmp_path):
    """trainer.flush_denormal (default on) decides, for the whole run, whether x86 computes subnormal
    floats (slowly) or flushes them to zero; conftest turns flushing off again after each test."""
    run_train(tiny_lm_overrides(steps=2) + [f"trainer.flush_denormal={flush}"], tmp_path)
    subnormal = (torch.tensor([1e-30]) * torch.tensor([1e-10])).item()
    assert (subnormal == 0.0) is flush
