"""A run saved before framework v4 (tests/fixtures/run_before_v4: 6 steps of a tiny PTB LM made by commit
0f723df, its checkpoint and .hydra/ as that code wrote them) resumes under today's code: the config keys
conf/ gained since are filled in, and the run ends at exactly the weights a fresh run of today reaches."""
from __future__ import annotations

import shutil

import pytest
import torch
from conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "run_before_v4"
# the command that made the fixture (at 0f723df, with trainer.max_steps=6 and hydra.run.dir=<fixture>)
OVERRIDES = ["task=lm", "model=sru", "model.hidden_size=16", "model.num_layers=2", "task.data.max_vocab=200",
             "task.data.max_train_tokens=4000", "task.batch_size=4", "task.eval_batch_size=4", "task.bptt=8",
             "trainer.max_epochs=null", "trainer.eval_every_steps=3", "trainer.eval_max_batches=20",
             "trainer.progress_bar=false", "trainer.plot=false", "trainer.num_threads=1", "logger=csv", "seed=0",
             "test_after_training=false"]


@pytest.mark.slow
def test_a_run_saved_before_v4_resumes_to_a_fresh_runs_weights(run_train, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(FIXTURE, old)
    run_train(OVERRIDES + ["trainer.max_steps=12", f"resume={old}"], old)
    assert "the saved config predates" in capsys.readouterr().out  # the keys conf/ gained since, named
    fresh = tmp_path / "fresh"
    run_train(OVERRIDES + ["trainer.max_steps=12"], fresh)
    resumed = torch.load(old / "checkpoints" / "last.pt", weights_only=True)
    again = torch.load(fresh / "checkpoints" / "last.pt", weights_only=True)
    assert resumed["step"] == again["step"] == 12
    for name, value in again["model"].items():
        assert torch.equal(resumed["model"][name], value), name
