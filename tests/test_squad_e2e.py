"""SQuAD end to end through train.py's composition: a tiny reader memorises the v1.1 fixture, writes
the official predictions files, and the independent oracle rescoring them gives the printed EM/F1."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT, compose
from squad_oracle import evaluate_files

TINY = ROOT / "tests" / "fixtures" / "squad" / "tiny-v1.1.json"


def tiny_squad_overrides(model: str, steps: int = 40):
    return [
        "task=squad", f"model={model}", "task.data.source=files",
        # train = valid = test: a memorisation check of the pipeline (real runs use the generated splits)
        *(f"task.data.files.{split}={TINY}" for split in ("train", "valid", "test")),
        "task.encoder.hidden_size=16", "task.encoder.num_layers=2", "model.dropout=0.0",
        "task.embedding.dim=16", "task.emb_dropout=0.0", "task.batch_size=4", "task.eval_batch_size=3",
        "trainer.optimizer.name=adamax", "trainer.optimizer.lr=0.02", "trainer.grad_clip=20",
        f"trainer.max_steps={steps}", "trainer.max_epochs=null", "trainer.eval_every_steps=20",
        "trainer.log_every_steps=5", "trainer.progress_bar=false", "trainer.plot=false",
        "trainer.num_threads=1", "logger=csv", "seed=0",
    ]


@pytest.mark.parametrize("model", ["sru", "lstm"])
def test_tiny_squad_run_writes_rescorable_predictions(model, run_train, tmp_path, capsys):
    summary = run_train(tiny_squad_overrides(model), tmp_path)
    out = capsys.readouterr().out
    test = summary["test"]
    assert summary["monitor"] == "f1" and test["f1"] >= 60.0, out  # 7 memorisable questions
    assert test["baseline_random_em"] <= test["em"]
    for split in ("valid", "test"):
        path = tmp_path / f"predictions_{split}.json"
        assert str(path) in out and str(TINY) in out  # both paths printed for rescoring
        predictions = json.loads(path.read_text(encoding="utf-8"))
        data = json.loads(TINY.read_text(encoding="utf-8"))["data"]
        contexts = {qa["id"]: p["context"] for a in data for p in a["paragraphs"] for qa in p["qas"]}
        assert set(predictions) == set(contexts)
        assert all(answer in contexts[qid] for qid, answer in predictions.items())  # exact substrings
    rescored = evaluate_files(TINY, tmp_path / "predictions_test.json")
    assert rescored["exact_match"] == pytest.approx(test["em"]) and rescored["f1"] == pytest.approx(test["f1"])


def test_bad_task_config_fails_before_data_loading():
    from tasks import build_task
    with pytest.raises(ValueError, match="task.data.source"):
        build_task(compose(["task=squad", "task.data.source=bogus"])).check_config()
    with pytest.raises(ValueError, match="model=sru or model=lstm"):
        build_task(compose(["task=squad", "model=cnn"])).check_config()
    with pytest.raises(ValueError, match="task.data.files.train"):
        task = build_task(compose(["task=squad", "task.data.source=files"]))
        task.setup()


def test_paper_experiments_compose():
    for unit in ("sru", "lstm"):
        cfg = compose([f"experiment=paper/squad_{unit}"])
        assert cfg.task.name == "squad" and cfg.model.name == unit and cfg.model.num_layers == 6
        assert cfg.model.hidden_size == 128 and cfg.task.encoder.num_layers == 6 and cfg.model.dropout == 0.2
        assert cfg.trainer.optimizer.name == "adamax" and cfg.trainer.grad_clip == 20 and cfg.task.batch_size == 32
