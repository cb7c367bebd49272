"""Nothing a user saved is rewritten by a later command (issue 44, item 1): a start refused because the run
dir is in use, and a ``resume=`` of a finished run, leave every file of the other run byte-identical (the
lock and the finished check come before Hydra writes ``.hydra/`` or ``train.log``: tasks/engine/train/run_start.py).
"""
from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from test_reliability_processes import TIMEOUT_S, cli_env, lm_cli_args, run_dirs_under, train_cli

pytestmark = pytest.mark.slow


def file_hashes(run_dir: Path) -> dict:
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _only_line(stream: str) -> str:
    lines = stream.strip().splitlines()
    assert len(lines) == 1, stream[-3000:]
    return lines[0]


def test_resume_of_a_finished_run_says_so_exits_0_and_changes_no_file(tmp_path):
    assert train_cli(tmp_path, lm_cli_args(4)[:-1]).returncode == 0  # with its test: results.json written
    (run,) = run_dirs_under(tmp_path / "outputs")
    before = file_hashes(run)
    assert {"results.json", "metrics.jsonl", ".hydra/config.yaml", "checkpoints/last.pt"} <= set(before)
    for how in (f"resume={run}", "resume=true"):
        proc = train_cli(tmp_path, [how, "trainer.max_steps=4"])
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        line = proc.stdout.strip().splitlines()[-1]
        assert line.startswith(f"[train] resume: {run} is finished at step 4 (it has trained trainer.max_steps=4 "
                               f"steps); nothing to train, nothing changed."), line
        assert file_hashes(run) == before and run_dirs_under(tmp_path / "outputs") == [run]
    # a new start into its directory would overwrite its .hydra/ record: refused before Hydra writes it
    proc = train_cli(tmp_path, lm_cli_args(4) + [f"hydra.run.dir={run}"])
    assert proc.returncode == 1 and _only_line(proc.stderr) == (
        f"[train] error: run directory {run} already holds a run (checkpoints or metrics); a new start there would "
        f"overwrite its .hydra/ record and metrics. Continue it with resume={run}, or pick another hydra.run.dir")
    assert file_hashes(run) == before
    # below the checkpoint: still refused in one line, still before anything is written
    proc = train_cli(tmp_path, [f"resume={run}", "trainer.max_steps=2"])
    assert proc.returncode == 1 and _only_line(proc.stderr).startswith("[train] error: resume: trainer.max_steps=2")
    assert file_hashes(run) == before


def test_a_start_refused_by_the_lock_leaves_every_file_of_the_owner_byte_identical(tmp_path):
    shared = tmp_path / "shared"
    owner = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *lm_cli_args(100000), f"hydra.run.dir={shared}",
                              "trainer.eval_every_steps=2"], env=cli_env(tmp_path / "outputs"), cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + TIMEOUT_S
        while not (shared / "checkpoints" / "last.pt").exists():
            assert owner.poll() is None, owner.communicate()[1][-3000:]
            assert time.time() < deadline, "the owner wrote no checkpoint"
            time.sleep(0.05)
        owner.send_signal(signal.SIGSTOP)  # frozen mid-training: its files cannot change while we look
        before = file_hashes(shared)
        assert {"run.lock", "train.log", ".hydra/config.yaml", ".hydra/overrides.yaml"} <= set(before)
        for args in ([*lm_cli_args(4), "model.hidden_size=16", f"hydra.run.dir={shared}"], [f"resume={shared}"]):
            proc = train_cli(tmp_path, args)
            assert proc.returncode == 1, proc.stderr[-3000:]
            assert _only_line(proc.stderr).startswith(f"[train] error: run directory {shared} is in use by pid "
                                                      f"{owner.pid} on host")
            assert file_hashes(shared) == before
    finally:
        owner.send_signal(signal.SIGCONT)
        owner.send_signal(signal.SIGTERM)
        owner.communicate(timeout=TIMEOUT_S)
    assert not (shared / "run.lock").exists()  # released on the way out
