"""Reliability v6 rows as real commands: ``python train.py`` (single runs, ``-m`` sweeps, Optuna sweeps, a
resume of a finished run, a signal during the imports). Each checks the exit status, the lines printed, that
no traceback is shown, and that no run dir is left behind or a saved run's files and folders are unchanged.
The messages themselves: tests/test_bad_inputs_training.py; docs/failures.md lists both."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest
from test_bad_inputs_commands import _left
from test_reliability_processes import ROOT, assert_one_error_line, cli_env, lm_cli_args, run_dirs_under, train_cli
from test_saved_runs_untouched import file_hashes

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("args,expected", [
    (["task.data.source=ptb", "task.data.train_file={tmp}/empty.txt"],
     "[train] error: task.data.train_file={tmp}/empty.txt: read only with task.data.source=files"),
    (["+sed=3"], "[train] error: +sed=3: sed is not a top-level key of the config, and nothing reads it (did you "
                 "mean seed?)"),
    (["model.hidden_size=200000"], "[train] error: the model does not fit: training it needs more than "),
    (["trainer.num_threads=10000"], "[train] error: trainer.num_threads=10000 is more than the "),
    (["task=nosuchtask"], "[train] error: task=nosuchtask: no such config task/nosuchtask.yaml; the choices: "),
    (["trainer.max_step=5"], "[train] error: trainer.max_step=5: max_step is not a key of trainer (did you mean "
                             "trainer.max_steps?)"),
], ids=["source-does-not-read-the-file", "top-level-typo", "hidden_size-beyond-the-memory", "num_threads",
        "task-group-missing", "key-not-in-struct"])
def test_a_training_bad_input_is_one_line_and_leaves_no_dir(args, expected, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    args = [a.format(tmp=tmp_path) for a in args]
    base = lm_cli_args(4)
    if any(a.startswith(("task.data.", "task=")) for a in args):  # the row's own data source / task
        base = [a for a in base if not a.startswith(("task.data.", "task="))]
    line = assert_one_error_line(train_cli(tmp_path, base + args))
    assert line.startswith(expected.format(tmp=tmp_path)), line
    assert _left(tmp_path) == []


def test_a_resume_with_a_bad_override_leaves_the_run_byte_identical(tmp_path):
    assert train_cli(tmp_path, lm_cli_args(2)).returncode == 0
    (run,) = run_dirs_under(tmp_path / "outputs")
    before = file_hashes(run), sorted(p.relative_to(run) for p in run.rglob("*"))
    for bad in ("trainer.max_steps=abc", "trainer.num_threads=10000"):
        assert_one_error_line(train_cli(tmp_path, [f"resume={run}", bad]), bad.partition("=")[0])
    assert (file_hashes(run), sorted(p.relative_to(run) for p in run.rglob("*"))) == before  # .hydra/ included


def _stderr_lines(proc) -> list:
    """Ours: without Hydra's and Optuna's log records ([2026-...][HYDRA] ..., [I 2026-...] ...)."""
    return [line for line in proc.stderr.splitlines() if not re.match(r"\[(\d{4}-|[IWE] \d{4}-)", line)]


def test_a_sweep_with_a_failing_job_says_so_and_exits_1(tmp_path):
    proc = train_cli(tmp_path, ["-m", *lm_cli_args(2), "model.hidden_size=16,abc", f"hydra.sweep.dir={tmp_path}/s"])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert _stderr_lines(proc) == [
        f"[train] sweep job 1 failed: model.hidden_size: expected an integer >= 1, received 'abc' (traceback: "
        f"{tmp_path}/s/1/failure.json)",
        f"[train] 1 of 2 jobs failed; see {tmp_path}/s/failures.jsonl"]
    assert "Traceback" in (tmp_path / "s" / "1" / "failure.json").read_text()


EMPTY_SWEEP = ("[train] the sweep ran no jobs: a swept list or range of the -m overrides is empty (e.g. "
               "range(16,8)), or the sweeper's n_trials is 0; check them")


def test_a_sweep_that_runs_no_job_says_so_and_exits_1(tmp_path):
    """Was silent, status 0: 'Launching 0 jobs locally' and nothing else."""
    proc = train_cli(tmp_path, ["-m", *lm_cli_args(2), "model.hidden_size=range(16,8)", f"hydra.sweep.dir={tmp_path}/s"])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert _stderr_lines(proc) == [EMPTY_SWEEP]
    assert EMPTY_SWEEP in (ROOT / "docs" / "failures.md").read_text()


def test_the_multirun_flag_after_the_overrides_runs_the_sweep(tmp_path):
    """``train.py <overrides> -m seed=0,1``: argparse read -m only before the overrides (a usage block and
    'unrecognized arguments'); the flag is moved to the front (tasks/engine/runner.py, flags_first)."""
    proc = train_cli(tmp_path, [*lm_cli_args(2), "-m", "seed=0,1", f"hydra.sweep.dir={tmp_path}/s"])
    assert proc.returncode == 0 and "unrecognized arguments" not in proc.stderr, proc.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_dir()) == ["0", "1"]


def test_an_optuna_space_no_trial_could_run_is_refused_before_trial_1(tmp_path):
    args = ["hparams_search=lm_optuna", *lm_cli_args(2), "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path}/s"]
    line = assert_one_error_line(train_cli(tmp_path, args + ["model.dropout=interval(1.5,2.0)"]))
    assert line.startswith("[train] error: search space model.dropout: a trial would draw 1.5"), line
    assert not (tmp_path / "s").exists()


def test_an_optuna_sweep_with_a_failing_trial_exits_1_and_says_the_best_is_of_the_others(tmp_path):
    searched = ("trainer.optimizer.lr=", "task.emb_dropout=", "task.out_dropout=", "task.data.valid_file=")
    args = ["hparams_search=lm_optuna", *[a for a in lm_cli_args(2) if not a.startswith(searched)],
            f"task.data.valid_file=choice({ROOT}/tests/fixtures/lm/valid.txt,{tmp_path}/nope.txt)",
            "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path}/s"]
    proc = train_cli(tmp_path, args)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    failed = [line for line in _stderr_lines(proc) if line.startswith("[train] sweep job ")]
    assert failed and all(f"LM data file not found: {tmp_path}/nope.txt" in line for line in failed), proc.stderr
    assert _stderr_lines(proc)[-1] == f"[train] {len(failed)} of {len(failed) + 2} jobs failed; see {tmp_path}/s/failures.jsonl"
    assert f"(of the complete trials only: {len(failed)} failed)" in proc.stdout


SRU_TRAIN = ["-c", "import sys; from tasks.engine.train.command import main; sys.argv[0] = 'sru-train'; main()"]


@pytest.mark.parametrize("command", [[str(ROOT / "train.py")], SRU_TRAIN], ids=["train.py", "sru-train"])
def test_a_signal_during_the_imports_is_one_line(command, tmp_path):
    proc = subprocess.Popen([sys.executable, *command, *lm_cli_args(50)], cwd=tmp_path,
                            env=cli_env(tmp_path / "outputs"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # inside the imports of torch and Hydra
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    assert err.strip().splitlines() == ["[train] stopped by SIGINT; nothing saved"], err[-3000:]
    assert _left(tmp_path) == []
