"""Preemption and run ownership with a real ``python train.py`` process (issue 10, items 1 and 3).

SIGTERM / SIGINT: the run finishes its optimizer step, writes last.pt, prints where it is and how to
resume, and exits 75; resuming it gives exactly the uninterrupted run. A second process resuming a
live run is refused; a second signal exits at once.
"""
from __future__ import annotations

import pytest

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from conftest import ROOT, tiny_lm_overrides

from tasks.engine.training.checkpoint import load_checkpoint
from tasks.engine.errors import EXIT_INTERRUPTED
from tasks.engine.run_metrics import read_metrics

TIMEOUT_S = 120


def _env(tmp_path: Path) -> dict:
    return dict(os.environ, WANDB_MODE="disabled", SRU_OUTPUTS=str(tmp_path / "outputs"), PYTHONPATH=str(ROOT))


def _start(tmp_path: Path, overrides) -> subprocess.Popen:
    cmd = [sys.executable, str(ROOT / "train.py"), *overrides, "test_after_training=false"]
    return subprocess.Popen(cmd, env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _wait_for(predicate, proc: subprocess.Popen, what: str):
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline:
        found = predicate()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"train.py exited ({proc.returncode}) before {what}:\n{proc.communicate()[1][-3000:]}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"timed out waiting for {what}")


def _run_dir(tmp_path: Path):
    runs = list((tmp_path / "outputs" / "runs").glob("*/*/metrics.jsonl"))
    return runs[0].parent if runs else None


def _last_train_step(run_dir: Path) -> int:
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
             if line.strip() and '"train"' in line]
    return steps[-1] if steps else 0


@pytest.mark.slow
def test_sigterm_mid_epoch_saves_last_and_resume_equals_uninterrupted_run(tmp_path, run_train):
    # 106 steps per epoch on the fixture, evaluation every 25: the signal lands mid-epoch, after an eval
    n = 300
    base = tiny_lm_overrides("sru", steps=n) + ["trainer.eval_every_steps=25"]
    proc = _start(tmp_path, base)
    run_dir = _wait_for(lambda: (d := _run_dir(tmp_path)) and _last_train_step(d) >= 27 and d, proc, "step 27")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == EXIT_INTERRUPTED, err[-3000:]
    ckpt = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    stopped = ckpt["step"]
    assert 27 <= stopped < n
    assert stopped == _last_train_step(run_dir)  # every step since the last evaluation is in last.pt
    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    assert best["step"] == ckpt["progress"]["best_step"] and best["step"] % 25 == 0  # only from an evaluation
    line = f"stopped by SIGTERM at step {stopped}: checkpoint {run_dir / 'checkpoints' / 'last.pt'}"
    assert line in err and f"resume with: python train.py resume={run_dir}" in err
    assert "Traceback" not in err
    assert not (run_dir / "run.lock").exists()  # released on the way out

    run_train(base + [f"resume={run_dir}"], run_dir)
    straight = tmp_path / "straight"
    run_train(base, straight)
    for split in ("train", "valid"):
        resumed, reference = read_metrics(run_dir, split), read_metrics(straight, split)
        assert [r["step"] for r in resumed] == [r["step"] for r in reference]  # each (split, step) once
        assert [r["loss"] for r in resumed] == [r["loss"] for r in reference]  # identical floats
    a, b = load_checkpoint(straight / "checkpoints" / "last.pt"), load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert a["step"] == b["step"] == n
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.slow
def test_second_process_cannot_resume_a_live_run_and_sigint_saves(tmp_path):
    proc = _start(tmp_path, tiny_lm_overrides("lstm", steps=100000) + ["trainer.eval_every_steps=10"])
    run_dir = _wait_for(lambda: (d := _run_dir(tmp_path)) and (d / "checkpoints" / "last.pt").exists() and d,
                        proc, "the first checkpoint")
    lock = json.loads((run_dir / "run.lock").read_text())
    assert lock["pid"] == proc.pid and lock["host"]
    second = subprocess.run([sys.executable, str(ROOT / "train.py"), f"resume={run_dir}"], env=_env(tmp_path),
                            cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert second.returncode == 1
    assert f"is in use by pid {proc.pid}" in second.stderr and "Traceback" not in second.stderr
    assert proc.poll() is None  # the owner keeps training
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == EXIT_INTERRUPTED, err[-3000:]
    assert "stopped by SIGINT at step" in err and "KeyboardInterrupt" not in err
    records = [(r["split"], r["step"]) for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())]
    assert len(records) == len(set(records))  # the refused process wrote nothing
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == _last_train_step(run_dir)


@pytest.mark.slow
def test_second_signal_exits_at_once():
    code = ("import os, signal, time\n"
            "from tasks.engine.run.interrupts import StopSignals\n"
            "with StopSignals() as stop, stop.deferred():\n"
            "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(0.2)\n"
            "    assert stop.requested(); print('first: a request', flush=True)\n"
            "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(30)\n"
            "print('not reached')\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "first: a request" in proc.stdout and "not reached" not in proc.stdout
    assert "second signal (SIGTERM): exiting now" in proc.stderr


@pytest.mark.slow
def test_bad_config_value_is_one_line_before_any_work(tmp_path):
    args = tiny_lm_overrides("sru", steps=4) + ["trainer.max_steps=abc"]
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), *args], env=_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == \
        "[train] error: trainer.max_steps: expected an integer >= 1 or null, received 'abc'"
    assert "Traceback" not in proc.stderr and "[lm]" not in proc.stdout  # no data was loaded


@pytest.mark.slow
def test_submitit_job_preempted_with_sigusr2_is_requeued_and_resumes(tmp_path):
    # hydra/launcher=local is submitit's local executor: the job process gets submitit's SIGUSR2 handler and
    # its controller restarts a job that asks for a requeue, as SLURM would
    n = 300
    sweep = tmp_path / "sweep"
    args = ["-m", *tiny_lm_overrides("sru", steps=n), "trainer.eval_every_steps=25", "hydra/launcher=local",
            f"hydra.sweep.dir={sweep}"]
    proc = _start(tmp_path, args)
    run_dir = sweep / "0"
    _wait_for(lambda: (run_dir / "checkpoints" / "last.pt").exists() and (run_dir / "run.lock").exists(),
              proc, "the job's first checkpoint")
    job_pid = json.loads((run_dir / "run.lock").read_text())["pid"]  # the job process, not the launcher
    os.kill(job_pid, signal.SIGUSR2)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err[-3000:]
    logs = "".join(p.read_text() for p in (sweep / ".submitit").glob("*/*_0_log.*"))
    assert "stopped by SIGUSR2 at step" in logs and "requeued job: resuming" in logs, logs[-3000:]
    assert json.loads((run_dir / "results.json").read_text())["steps"] == n
    for split in ("train", "valid"):
        steps = [r["step"] for r in read_metrics(run_dir, split)]
        assert steps == sorted(set(steps)) and steps[-1] == n, split
    assert [r["step"] for r in read_metrics(run_dir, "train")] == list(range(1, n + 1))  # none lost


class _BusyWriter:
    """A stream whose writer is in use, as the tee'd train.log is when a signal lands mid-print."""

    def write(self, text):
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='train.log'>")

    def flush(self):
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='train.log'>")


def test_signal_while_a_line_is_being_written_stops_cleanly(monkeypatch, capfd):
    """The handler's notice goes to file descriptor 2 directly: a print from the handler would re-enter the
    writer the interrupted print holds and end the run in a RuntimeError instead of a clean stop (seen in CI:
    SIGTERM while a [train] line was copied to train.log)."""
    from tasks.engine.run.interrupts import StopSignals

    stop = StopSignals()
    with stop.deferred():
        monkeypatch.setattr(sys, "stderr", _BusyWriter())
        stop.handle(signal.SIGTERM)  # old code: RuntimeError from print
        monkeypatch.undo()
    assert stop.requested()
    assert "SIGTERM: stopping after the current optimizer step" in capfd.readouterr().err
