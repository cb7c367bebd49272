"""SQuAD end to end through train.py's composition: a tiny reader memorises the v1.1 fixture, writes
the official predictions files, and the independent oracle rescoring them gives the printed EM/F1."""
from __future__ import annotations

import json

import pytest
from conftest import ROOT, compose
from squad_oracle import evaluate_files

from tasks.engine.run_metrics import read_metrics

TINY = ROOT / "tests" / "fixtures" / "squad" / "tiny-v1.1.json"


def tiny_squad_overrides(model: str, steps: int = 40):
    return [
        "task=squad", f"model={model}", "task.data.source=files",
        # train = valid = test: a memorisation check of the pipeline (real runs use the generated splits)
        *(f"task.data.files.{split}={TINY}" for split in ("train", "valid", "test")),
        "task.encoder.hidden_size=16", "task.encoder.num_layers=2", "model.dropout=0.0",
        "task.embedding.dim=16", "task.embedding.path=null", "task.emb_dropout=0.0", "task.batch_size=4", "task.eval_batch_size=3",
        "trainer.optimizer.name=adamax", "trainer.optimizer.lr=0.02", "trainer.grad_clip=20",
        f"trainer.max_steps={steps}", "trainer.max_epochs=null", "trainer.eval_every_steps=20",
        "trainer.log_every_steps=5", "trainer.progress_bar=false", "trainer.plot=false",
        "trainer.num_threads=1", "logger=csv", "seed=0",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["sru", "lstm"])
def test_tiny_squad_run_writes_rescorable_predictions(model, run_train, tmp_path, capsys, monkeypatch):
    summary = run_train(tiny_squad_overrides(model), tmp_path)
    out = capsys.readouterr().out
    test = summary["test"]
    assert summary["monitor"] == "f1" and test["f1"] >= 60.0, out  # 7 memorisable questions
    assert test["baseline_random_em"] <= test["em"]
    # the tuning half of the hand-written questions is scored beside every test evaluation, its predictions kept
    human = json.loads((tmp_path / "predictions_human.json").read_text(encoding="utf-8"))
    assert len(human) == 76 and 0 <= test["human_em"] <= test["human_f1"] <= 100
    assert "[squad] human check set: EM" in out
    timed = [r for r in read_metrics(tmp_path, "valid") if "epoch_seconds" in r]
    assert timed and all(0 < r["encoder_seconds"] < r["epoch_seconds"] for r in timed)  # time per epoch, RNN share
    assert "[squad] epoch 0:" in out
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
    # the repository's rescoring script agrees too
    from tasks.squad.score_predictions import main as evaluate_squad
    capsys.readouterr()
    evaluate_squad([str(TINY), str(tmp_path / "predictions_test.json")])
    printed = json.loads(capsys.readouterr().out)
    assert printed["exact_match"] == pytest.approx(test["em"]) and printed["unanswered"] == 0


def test_bad_task_config_fails_before_data_loading():
    from tasks.engine.base import build_task
    with pytest.raises(ValueError, match="task.data.source"):
        build_task(compose(["task=squad", "task.data.source=bogus"])).check_config()
    with pytest.raises(ValueError, match=r"model=cnn: task=squad accepts model= one of \['sru', 'lstm'\]"):
        build_task(compose(["task=squad", "model=cnn"])).check_config()
    with pytest.raises(ValueError, match="task.data.files.train"):
        task = build_task(compose(["task=squad", "task.data.source=files"]))
        task.setup()


def test_paper_experiments_compose():
    for unit, layers in (("sru", 6), ("lstm", 3)):  # the paper: SRU 6 layers vs DrQA's 3-layer LSTM
        cfg = compose([f"experiment=paper/squad_{unit}"])
        assert cfg.task.name == "squad" and cfg.model.name == unit and cfg.model.num_layers == layers
        assert cfg.model.hidden_size == 128 and cfg.task.encoder.num_layers == layers and cfg.model.dropout == 0.2
        assert cfg.trainer.optimizer.name == "adamax" and cfg.trainer.grad_clip == 20 and cfg.task.batch_size == 32


def test_hub_rows_convert_to_valid_v11_files(tmp_path, monkeypatch):
    """The hub's flat rows (one per question) regroup into articles/paragraphs the v1.1 loader accepts."""
    import datasets

    from tasks.engine.config.schema import typed
    from tasks.squad.data import load_squad_file, split_files
    from tasks.squad.schema import SquadDataConfig

    rows = [{"id": "h1", "title": "Zürich", "context": "Zürich lies on the Limmat.", "question": "Where?",
             "answers": {"text": ["the Limmat"], "answer_start": [15]}},
            {"id": "h2", "title": "Zürich", "context": "Zürich lies on the Limmat.", "question": "What lies?",
             "answers": {"text": ["Zürich", "Zürich"], "answer_start": [0, 0]}}]
    calls = []
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda name, config=None: calls.append(name) or {"train": rows, "validation": rows[:1]})
    data = typed(compose(["task=squad", "task.data.source=hub", f"task.data.cache_dir={tmp_path}"]).task.data,
                 SquadDataConfig, "task.data")
    paths = split_files(data)
    train = load_squad_file(paths["train"])
    assert [ex.qid for ex in train] == ["h1", "h2"] and train[1].answers == ["Zürich", "Zürich"]
    assert [ex.qid for ex in load_squad_file(paths["valid"])] == ["h1"] and paths["test"] == paths["valid"]
    split_files(data)
    assert calls == ["squad"]  # converted once, then read from the cache


def test_pretrained_vectors_tune_only_the_top_question_words(tmp_path):
    """DrQA's tune_partial: with a vector file, only the N most frequent question words get gradients."""
    import torch

    from tasks.engine.base import build_task

    words = ["what", "the", "zürich", "limmat", "athens", "city", "river"]
    vec = tmp_path / "vectors.txt"
    vec.write_text(f"{len(words)} 8\n" + "".join(f"{w} " + " ".join(["0.1"] * 8) + "\n" for w in words),
                   encoding="utf-8")
    cfg = compose([*tiny_squad_overrides("sru"), f"task.embedding.path={vec}", "task.embedding.dim=8",
                   "task.embedding.tune_partial=3"])
    task = build_task(cfg)
    task.setup()
    model = task.build_model()
    from collections import Counter

    from tasks.squad.data import load_squad_file, tokenize
    counts = Counter(w.lower() for ex in load_squad_file(TINY) for w in tokenize(ex.question)[0])
    top = sorted(counts, key=lambda w: (-counts[w], w))[:3]
    assert task.fixed_rows_from == 5 and task.vocab.itos[2:5] == top  # the top question words come first
    limmat = torch.tensor([task.vocab.stoi["limmat"]])
    assert torch.allclose(model.embedding(limmat), torch.full((1, 8), 0.1))
    batch = next(iter(task.batches("train", 0, 0)))
    loss, _ = task.compute_loss(model, batch, "train")
    loss.backward()
    # only the top rows are parameters (and all get gradients); the rest is a fixed buffer
    assert model.embedding.weight.shape[0] == task.fixed_rows_from and not model.embedding.fixed.requires_grad
    assert model.embedding.weight.grad[2:].abs().sum() > 0
    assert len(model.embedding.fixed) == len(task.vocab) - task.fixed_rows_from
    # saved as one table, as before the split (checkpoints keep their layout), and loaded back into the split
    state = model.state_dict()
    assert tuple(state["embedding.weight"].shape) == (len(task.vocab), 8) and "embedding.fixed" not in state
    fresh = task.build_model()
    fresh.load_state_dict(state)
    assert torch.equal(fresh.embedding(torch.arange(len(task.vocab))), model.embedding(torch.arange(len(task.vocab))))
