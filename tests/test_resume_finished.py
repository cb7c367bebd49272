"""A resume of a finished run changes no file and writes no ``.hydra/resume-*`` entry (issue 50, item 8),
whichever budget ended it: trainer.max_steps (tests/test_saved_runs_untouched.py), trainer.max_epochs
while max_steps is larger, or early stopping. Rows of docs/failures.md's resume table."""
from __future__ import annotations

import pytest
from test_reliability_processes import lm_cli_args, run_dirs_under, train_cli
from test_saved_runs_untouched import file_hashes

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("budget,reason", [
    (["trainer.max_steps=1000", "trainer.max_epochs=1"], "it has trained trainer.max_epochs=1 epochs"),
    (["trainer.max_steps=1000", "trainer.max_epochs=5", "trainer.eval_every_steps=2", "trainer.optimizer.lr=0.3",
      "trainer.early_stopping_patience=0"], "it stopped early (1 evaluations without improvement"),
], ids=["ended-by-epochs", "ended-by-early-stopping"])
def test_resume_of_a_run_ended_by_any_budget_changes_nothing(budget, reason, tmp_path):
    args = [a for a in lm_cli_args(4) if a != "test_after_training=false"] + budget  # with its test: results.json
    done = train_cli(tmp_path, args)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = run_dirs_under(tmp_path / "outputs")
    before = file_hashes(run)
    assert "results.json" in before
    proc = train_cli(tmp_path, [f"resume={run}"])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith(f"[train] resume: {run} is finished at step ") and reason in line, line
    assert file_hashes(run) == before and not list((run / ".hydra").glob("resume-*"))
