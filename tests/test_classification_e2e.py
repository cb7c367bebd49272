"""Classification end to end through train.py's composition (sru / lstm / cnn), pooling semantics,
summable metrics, and the cross-validation driver."""
from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
from conftest import ROOT, compose

from tasks.classification.metrics import count_logging_output, reduce_classification
from tasks.classification.model import pool
from tasks.engine.run_metrics import read_metrics

FIX = ROOT / "tests" / "fixtures" / "classification"
MODEL_OVERRIDES = {
    "sru": ["model.hidden_size=16", "model.num_layers=2", "model.dropout=0.0", "model.rnn_dropout=0.0"],
    "lstm": ["model.hidden_size=16", "model.num_layers=1", "model.dropout=0.0"],
    "cnn": ["model.filters=8"],
}


def tiny_classification_overrides(model: str, epochs: int = 12):
    return [
        "task=classification", f"model={model}", *MODEL_OVERRIDES.get(model, []),
        "task.data.name=null", "task.data.source=files",
        # train = valid = test file: a memorisation check of the whole pipeline (real data would be split)
        *(f"task.data.files.{split}={FIX / 'reviews.csv'}" for split in ("train", "valid", "test")),
        # random trained embeddings (the task default loads the offline word2vec vectors)
        "task.embedding.dim=16", "task.embedding.path=null", "task.embedding.normalize=false",
        "task.batch_size=4", "task.eval_batch_size=8", "task.dropout=0.0",
        "trainer.optimizer.name=adam", "trainer.optimizer.lr=0.01", "trainer.optimizer.weight_decay=0",
        f"trainer.max_epochs={epochs}", "trainer.eval_every_steps=null", "trainer.log_every_steps=1",
        "trainer.progress_bar=false", "trainer.grad_clip=null",
        "trainer.plot=false", "trainer.num_threads=1", "logger=csv", "seed=0",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["sru", "lstm", "cnn"])
def test_tiny_classification_trains_end_to_end(model, run_train, tmp_path):
    summary = run_train(tiny_classification_overrides(model), tmp_path)
    train = read_metrics(tmp_path, "train")
    losses = [r["loss"] for r in train]
    assert all(math.isfinite(x) for x in losses)
    # 24 training sentences, memorisable: late epochs' loss far below the first steps'
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5, losses
    valid = read_metrics(tmp_path, "valid")
    assert len(valid) >= 12 and all(0.0 <= r["accuracy"] <= 100.0 for r in valid)
    assert summary["monitor"] == "accuracy" and summary["best_valid"] == max(r["accuracy"] for r in valid)
    test = summary["test"]
    assert test["accuracy"] >= 90.0 and 0.0 <= test["macro_f1"] <= 100.0  # test == train file here
    assert json.loads((tmp_path / "results.json").read_text())["test"]["accuracy"] == test["accuracy"]


@pytest.mark.slow
def test_default_task_config_composes_for_every_model():
    from tasks.engine.base import build_task
    for model in ("sru", "lstm", "cnn"):
        cfg = compose(["task=classification", f"model={model}"])
        assert cfg.task.data.name == "mr" and cfg.task.data.cv_folds == 10
        assert build_task(cfg).monitor == "accuracy"


@pytest.mark.slow
@pytest.mark.parametrize("exp", sorted(p.stem for p in (ROOT / "conf/experiment/paper").glob("classification_*.yaml")))
def test_paper_experiments_compose(exp):
    cfg = compose([f"experiment=paper/{exp}"])
    assert cfg.task.name == "classification" and cfg.trainer.optimizer.name == "adam"
    assert cfg.task.batch_size == 32 and cfg.task.data.name in exp


def test_last_pooling_reads_last_real_token_and_backward_first():
    L, B, H = 4, 2, 6
    out = torch.arange(L * B * H, dtype=torch.float).view(L, B, H)
    lengths = torch.tensor([4, 2])
    mask = torch.arange(L).unsqueeze(1) >= lengths
    uni = pool(out, mask, lengths, "last", bidirectional=False)
    assert torch.equal(uni, torch.stack([out[3, 0], out[1, 1]]))
    bi = pool(out, mask, lengths, "last", bidirectional=True)
    assert torch.equal(bi[1], torch.cat([out[1, 1, :3], out[0, 1, 3:]]))
    mx = pool(out.neg(), mask, lengths, "max", False)       # max ignores padded steps
    assert torch.equal(mx[1], out[0, 1].neg())
    mean = pool(out, mask, lengths, "mean", False)
    assert torch.allclose(mean[1], (out[0, 1] + out[1, 1]) / 2)


def test_padding_does_not_change_a_sentence_prediction():
    """The same sentence alone or padded in a batch with a longer one gives the same logits (eval mode)."""
    from tasks.engine.base import build_task
    for model in ("sru", "lstm", "cnn"):
        task = build_task(compose(tiny_classification_overrides(model)))
        task.setup()
        net = task.build_model().eval()
        from tasks.classification.data import collate
        split = task.encoded["test"]
        short = min(range(len(split)), key=lambda i: len(split.token_ids[i]))
        longest = max(range(len(split)), key=lambda i: len(split.token_ids[i]))
        alone, padded = collate(split, [short]), collate(split, [short, longest])
        assert padded["mask_pad"][:, 0].any()
        with torch.no_grad():
            a = net(alone["tokens"], alone["mask_pad"], alone["lengths"])[0]
            b = net(padded["tokens"], padded["mask_pad"], padded["lengths"])[0]
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=model)


def test_metrics_are_exact_when_summed_over_batches():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0], [2.0, 0.0, 0.0]])
    labels = torch.tensor([0, 1, 2, 2, 1])
    whole = count_logging_output(logits, labels, 5.0, 3)
    parts = [count_logging_output(logits[:2], labels[:2], 2.0, 3), count_logging_output(logits[2:], labels[2:], 3.0, 3)]
    summed = {k: parts[0][k] + parts[1][k] for k in whole}
    assert summed == whole
    m = reduce_classification(summed, 3)
    assert m["accuracy"] == pytest.approx(60.0) and m["loss"] == pytest.approx(1.0)
    # per class F1: c0 tp1 fp1 fn0 -> 2/3; c1 tp1 fp1 fn1 -> 1/2; c2 tp1 fp0 fn1 -> 2/3
    assert m["macro_f1"] == pytest.approx(100 * (2 / 3 + 1 / 2 + 2 / 3) / 3)


@pytest.mark.slow
def test_cross_validation_driver_runs_folds_and_models(tmp_path):
    from tasks.classification import cross_validation as run_cv
    overrides = [o for o in tiny_classification_overrides("{model}", epochs=2) if "task.data.files" not in o]
    overrides += [f"task.data.files.train={FIX / 'reviews.csv'}", "task.data.cv_folds=3"]
    result = run_cv.main(["--fold-list", "0,2", "--models", "lstm,cnn", "--out", str(tmp_path)] + overrides)
    runs = result["runs"]
    assert [(r["model"], r["fold"]) for r in runs] == [("lstm", 0), ("cnn", 0), ("lstm", 2), ("cnn", 2)]
    # 3 folds of 24 rows: test = 8, validation carved from the other 16
    assert all(0 < r["n_train"] < 16 and r["sec_per_epoch"] > 0 for r in runs)
    # how long each run trained (from its metrics_valid.csv): 2 epochs, best at 1 or 2
    assert all(r["epochs_run"] == 2 and r["best_epoch"] in (1, 2) for r in runs)
    assert result["summary"][0]["epochs_run"] == "2-2 (mean 2.0)"
    assert [r["model"] for r in result["summary"]] == ["lstm", "cnn"]
    assert " ± " in result["summary"][0]["test_accuracy"]
    assert (tmp_path / "cv_summary.md").read_text().count("| lstm |") == 1
    assert (tmp_path / "cnn" / "fold2" / "results.json").is_file()

    # Rerunning resumes: finished runs are read back (their results.json untouched), a missing one runs.
    before = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/fold*/results.json")}
    shutil.rmtree(tmp_path / "cnn" / "fold2")
    again = run_cv.main(["--fold-list", "0,2", "--models", "lstm,cnn", "--out", str(tmp_path)] + overrides)
    finished = {p: t for p, t in before.items() if "cnn/fold2" not in str(p)}
    assert len(finished) == 3 and {p: p.stat().st_mtime_ns for p in finished} == finished
    assert (tmp_path / "cnn" / "fold2" / "results.json").is_file()
    assert [r["test_accuracy"] for r in again["runs"][:3]] == [r["test_accuracy"] for r in runs[:3]]


def test_train_batches_are_a_pure_function_of_seed_and_epoch():
    """Exact resume: batches from index k equal the uninterrupted order's tail; epochs reshuffle."""
    from tasks.engine.base import build_task
    task = build_task(compose(tiny_classification_overrides("cnn")))
    task.setup()
    full = [b["labels"].tolist() + b["tokens"][0].tolist() for b in task.batches("train", epoch=1, seed=3)]
    tail = [b["labels"].tolist() + b["tokens"][0].tolist() for b in task.batches("train", epoch=1, seed=3, start=2)]
    assert tail == full[2:] and len(full) == task.num_batches("train") == 6
    other = [b["labels"].tolist() + b["tokens"][0].tolist() for b in task.batches("train", epoch=2, seed=3)]
    assert other != full
