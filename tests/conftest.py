"""Shared test helpers: compose the real Hydra config and run the real train.py pipeline in-process."""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import List, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
LM_FIXTURE = ROOT / "tests" / "fixtures" / "lm"
os.environ.setdefault("WANDB_MODE", "disabled")  # tests never talk to wandb servers


def compose(overrides: Sequence[str] = ()):
    """The config ``python train.py <overrides>`` would run with (the hydra node excluded)."""
    from tasks.engine.train.runner import compose as runner_compose

    return runner_compose(overrides, CONF)


def typed_data(task: str, schema: type, **values):
    """The typed ``task.data`` section of ``task=<task>`` (``schema``) with ``values`` set: what the data
    readers take."""
    import dataclasses

    from tasks.engine.config.schema import typed

    return dataclasses.replace(typed(compose([f"task={task}"]).task.data, schema, "task.data"), **values)


@functools.lru_cache(maxsize=None)
def _model_group(name: str) -> str:
    from omegaconf import OmegaConf
    return OmegaConf.to_yaml(compose([f"model={name}"]).model, resolve=True)  # cached as text: never shared


def model_config(name: str, **overrides) -> dict:
    """conf/model/<name>.yaml with ``overrides``: the model config ``model=<name> model.k=v ...`` gives (the
    schemas hold no defaults, so a hand-written dict of a few keys is refused)."""
    import yaml
    cfg = yaml.safe_load(_model_group(name))
    unknown = set(overrides) - set(cfg)
    assert not unknown, f"model={name} has no keys {sorted(unknown)}"
    return {**cfg, **overrides}


def tiny_lm_overrides(model: str = "sru", steps: int = 12) -> List[str]:
    """A seconds-long LM run on the fixture: small model, short BPTT, Adam, evaluation every 4 steps."""
    return [
        "task=lm", f"model={model}",
        "task.data.source=files",
        f"task.data.train_file={LM_FIXTURE / 'train.txt'}",
        f"task.data.valid_file={LM_FIXTURE / 'valid.txt'}",
        f"task.data.test_file={LM_FIXTURE / 'test.txt'}",
        "task.batch_size=4", "task.eval_batch_size=4", "task.bptt=8",
        "task.emb_dropout=0.1", "task.out_dropout=0.1",
        "model.hidden_size=32", "model.num_layers=2",
        "trainer.optimizer.name=adam", "trainer.optimizer.lr=0.03", "trainer.optimizer.weight_decay=0",
        f"trainer.max_steps={steps}", "trainer.max_epochs=null", "trainer.eval_every_steps=4",
        "trainer.log_every_steps=1", "trainer.progress_bar=false", "trainer.plot=false",
        "trainer.num_threads=1", "logger=csv", "seed=0",
    ]


@pytest.fixture(autouse=True)
def _subnormals_restored():
    """A speech run flushes subnormal floats to zero for the whole process (tasks/speech/task.py); turn it
    back off after every test so that no later test depends on which tests ran before it."""
    yield
    import torch
    torch.set_flush_denormal(False)


@pytest.fixture
def int8_kernels_on_tiny_products(monkeypatch):
    """The test models are tiny, so every int8 product would fall under sru's INT8_MIN_WORK and run in float32
    with the dequantised weights (sru/ops/cpu/int8.py); with no threshold the int8 kernel runs them."""
    from sru.ops.cpu import int8
    monkeypatch.setattr(int8, "INT8_MIN_WORK", {0: 0})


def fit_in_run(cfg, task, run_dir, **kwargs):
    """``fit`` inside the one run context, opened as the runner opens it (tasks/engine/run/context.py)."""
    from tasks.engine.run.context import open_run
    from tasks.engine.training.trainer import fit

    with open_run(cfg, run_dir) as ctx:
        return fit(cfg, task, ctx, **kwargs)


@pytest.fixture
def run_train():
    """run_train(overrides, run_dir) -> summary dict, exactly as train.py's main would run it."""
    from tasks.engine.train.runner import run

    def _run(overrides: Sequence[str], run_dir: Path):
        cfg = compose(overrides)
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        return run(cfg, Path(run_dir), overrides)

    return _run


def check_attention_lm_run(run_dir: Path, summary) -> None:
    """A tiny attention LM run (SRU++, Transformer) learnt, and tasks/lm/generate.py's step decoding gives
    the logits of one causal forward over prompt + sample."""
    import math

    import torch

    from tasks.engine.run_metrics import read_metrics
    losses = [r["loss"] for r in read_metrics(run_dir, "train")]
    assert len(losses) == 24 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.5
    valid = read_metrics(run_dir, "valid")
    assert valid[-1]["ppl"] < valid[0]["ppl"]
    assert math.isfinite(summary["test"]["ppl"])
    from tasks.engine.inference.loader import load_trained
    from tasks.lm.generate import generate
    trained = load_trained(run_dir, device="cpu")
    model, vocab = trained.model, trained.task.vocab
    prompt = vocab.encode("the cat".split())
    ids, logits = generate(model, prompt, 6, greedy=True)
    with torch.no_grad():
        full, _ = model(torch.tensor(prompt + ids).unsqueeze(1))
    torch.testing.assert_close(logits, full[len(prompt) - 1:-1, 0], rtol=1e-5, atol=1e-5)
    assert ids == [int(x) for x in full[len(prompt) - 1:-1, 0].argmax(-1)]


def check_step_decoding(enc, x):
    """``enc.step`` one position at a time, from nothing and from the state of a forward over the first half,
    gives exactly the outputs of one forward over ``x`` (L, B, D); returns the last step's state."""
    import torch
    with torch.no_grad():
        whole, _ = enc(x)
        _, state = enc(x[:x.size(0) // 2])
    for start, st in ((0, None), (x.size(0) // 2, state)):
        outs = []
        for t in range(start, x.size(0)):
            h, st = enc.step(x[t], st)
            outs.append(h)
        torch.testing.assert_close(torch.stack(outs), whole[start:], rtol=0, atol=1e-12)
    return st
