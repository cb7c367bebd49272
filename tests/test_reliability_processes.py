"""First-use rows of issue 28 that are about a process: a real ``python train.py`` (or a real Python process
using the trainer's signal handling), its exit status, its last stderr line and what it leaves on disk.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import LM_FIXTURE, ROOT, tiny_lm_overrides

from tasks.engine.training.checkpoint import load_checkpoint
from tasks.engine.errors import EXIT_INTERRUPTED

pytestmark = pytest.mark.slow
TIMEOUT_S = 300


def cli_env(outputs: Path) -> dict:
    return dict(os.environ, WANDB_MODE="disabled", SRU_OUTPUTS=str(outputs), PYTHONPATH=str(ROOT),
                PYTHONUNBUFFERED="1")


def train_cli(tmp_path: Path, args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *args], env=cli_env(tmp_path / "outputs"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S, **kwargs)


def run_dirs_under(outputs: Path):
    return sorted(p for p in (outputs / "runs").glob("*/*") if p.is_dir())


def assert_one_error_line(proc: subprocess.CompletedProcess, *expected: str) -> str:
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("[train] error:")]
    assert len(errors) == 1 and proc.stderr.strip().splitlines()[-1] == errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Error executing job" not in proc.stderr, proc.stderr[-3000:]
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def lm_cli_args(steps: int, train_file: Path = LM_FIXTURE / "train.txt"):
    return [o for o in tiny_lm_overrides("sru", steps=steps) if not o.startswith("task.data.train_file=")] + \
        [f"task.data.train_file={train_file}", "test_after_training=false"]


# ---- refused / aborted starts leave nothing; resume=true then continues the run that has a checkpoint -------
def test_refused_and_aborted_starts_leave_no_run_dir_and_resume_true_finds_the_real_run(tmp_path):
    outputs = tmp_path / "outputs"
    assert train_cli(tmp_path, lm_cli_args(4)).returncode == 0
    (real,) = run_dirs_under(outputs)
    assert_one_error_line(train_cli(tmp_path, lm_cli_args(4) + ["trainer.max_steps=abc"]), "trainer.max_steps")
    assert_one_error_line(train_cli(tmp_path, lm_cli_args(4, tmp_path / "missing.txt")), str(tmp_path / "missing.txt"))
    assert run_dirs_under(outputs) == [real]

    big = tmp_path / "big.txt"  # tokenising ~40 MB takes seconds: the signal lands while the data loads
    with open(big, "w") as f:
        chunk = (LM_FIXTURE / "train.txt").read_text()
        for _ in range(40_000_000 // len(chunk)):
            f.write(chunk)
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *lm_cli_args(4, big)], env=cli_env(outputs), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # printed just before the task loads its data
        if line.startswith("[train] run dir:"):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "stopped by SIGTERM outside the training loop" in err and "Traceback" not in err
    assert run_dirs_under(outputs) == [real]

    resumed = train_cli(tmp_path, lm_cli_args(8) + ["resume=true"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resume=true: continuing {real}" in resumed.stdout
    assert load_checkpoint(real / "checkpoints" / "last.pt")["step"] == 8


# ---- the printed resume command pastes back as it is --------------------------------------------------------
def test_printed_resume_command_works_under_a_path_with_spaces(tmp_path):
    root = tmp_path / "my runs"
    args = lm_cli_args(100_000) + ["trainer.eval_every_steps=5", f"paths.root='{root}'"]
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], env=cli_env(tmp_path / "outputs"),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + TIMEOUT_S
    while not list(root.glob("runs/*/*/checkpoints/last.pt")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == EXIT_INTERRUPTED, err[-3000:]
    command = re.search(r"resume with: (python train\.py .*)$", err, re.M).group(1)
    assert "'" in command  # the path needs quoting for Hydra (and the shell)
    (run_dir,) = list(root.glob("runs/*/*"))
    step = load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"]
    pasted = command.replace("python train.py", f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'train.py'))}", 1)
    done = subprocess.run(["bash", "-c", f"{pasted} trainer.max_steps={step + 2}"], env=cli_env(tmp_path / "outputs"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == step + 2


# ---- the console: loss lines every log_every_steps, train.log holds them ---------------------------------
@pytest.mark.parametrize("bar", ["false", "true"])
def test_loss_reaches_the_console_every_log_every_steps_and_train_log_holds_the_console(bar, tmp_path):
    proc = train_cli(tmp_path, lm_cli_args(6) + ["trainer.log_every_steps=2", f"trainer.progress_bar={bar}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = re.findall(r"^\[train\] step (\d+) epoch 0 lr \S+ loss \S+ ppl", proc.stdout, re.M)
    assert shown == ["2", "4", "6"]
    (run_dir,) = run_dirs_under(tmp_path / "outputs")
    log = (run_dir / "train.log").read_text()
    for line in proc.stdout.splitlines():
        if line.startswith(("[train]", "[eval]", "[trainer]", "[lm]")):
            assert line.strip() in log, line
    assert "\r" not in log  # progress-bar redraws stay on the terminal


# ---- user errors: one line, no Hydra "Error executing job" + traceback ---------------------------------
def test_data_and_checkpoint_errors_end_as_one_line(tmp_path):
    binary = tmp_path / "binary.txt"
    binary.write_bytes(os.urandom(50_000))
    assert_one_error_line(train_cli(tmp_path, lm_cli_args(4, binary)), str(binary), "task.data.train_file", "not a text file")
    assert_one_error_line(train_cli(tmp_path, lm_cli_args(4, tmp_path)), str(tmp_path))  # a directory, not a file
    assert train_cli(tmp_path, lm_cli_args(4)).returncode == 0
    (run_dir,) = run_dirs_under(tmp_path / "outputs")
    assert_one_error_line(train_cli(tmp_path, lm_cli_args(2) + [f"resume={run_dir}"]), "trainer.max_steps=2 is below")
    (run_dir / "checkpoints" / "last.pt").write_bytes(b"garbage")
    assert_one_error_line(train_cli(tmp_path, [f"resume={run_dir}"]), "corrupted or truncated")


def test_missing_apt_dictionary_names_a_ready_override_that_runs_on_the_sample_data(tmp_path):
    line = assert_one_error_line(
        train_cli(tmp_path, ["task=translation", "debug=smoke", "task.data.source=dictionary",
                          "task.data.dictionary_path=/nonexistent/de-en",
                          f"task.data.cache_dir={tmp_path / 'cache'}"]), "apt-get install trans-de-en")
    ready = re.search(r"(python train\.py task=translation .*)$", line).group(1)
    argv = shlex.split(ready)[2:]
    assert all(Path(a.split("=", 1)[1]).is_file() for a in argv if a.startswith("task.data.files."))
    done = train_cli(tmp_path, argv + ["debug=smoke", "trainer.max_steps=2", "trainer.eval_max_batches=1",
                                    f"task.data.cache_dir={tmp_path / 'cache'}", "trainer.num_threads=1"])
    assert done.returncode == 0, done.stderr[-3000:]


# ---- debug=smoke with another logger writes that logger's files ------------------------------------------
def test_smoke_run_with_tensorboard_writes_event_files(tmp_path):
    pytest.importorskip("tensorboard")
    args = [o for o in lm_cli_args(4) if not o.startswith(("logger=", "trainer.max_steps"))]
    proc = train_cli(tmp_path, args + ["debug=smoke", "logger=tensorboard"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = run_dirs_under(tmp_path / "outputs")
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))


# ---- no partial .tmp: a second signal while saving; a kill -9 leftover removed at the next start -------------
def test_second_sigterm_while_saving_leaves_no_tmp_and_keeps_the_previous_checkpoint(tmp_path):
    code = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from tasks.engine.training.checkpoint import save_atomic
        from tasks.engine.run.interrupts import StopSignals

        class SignalsWhilePickled:  # pickling it (mid-save) delivers SIGTERM twice
            def __reduce__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)
                return (int, (0,))

        path = Path({str(tmp_path / 'last.pt')!r})
        save_atomic({{"model": {{}}, "step": 1}}, path)
        with StopSignals() as stop, stop.deferred():
            save_atomic({{"model": {{}}, "step": 2, "payload": [b"x" * 1_000_000, SignalsWhilePickled()]}}, path)
        print("not reached")
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(tmp_path), capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-3000:]
    assert "second signal (SIGTERM): exiting now" in proc.stderr and "not reached" not in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # no last.pt.tmp
    assert load_checkpoint(tmp_path / "last.pt")["step"] == 1


def test_a_leftover_tmp_is_removed_when_the_run_continues(run_train, tmp_path):
    run_train(tiny_lm_overrides("sru", steps=4), tmp_path)
    leftover = tmp_path / "checkpoints" / "last.pt.tmp"  # what a kill -9 mid-save leaves
    leftover.write_bytes(b"partial")
    run_train(tiny_lm_overrides("sru", steps=6) + [f"resume={tmp_path}"], tmp_path)
    assert not leftover.exists()


# ---- read-only and full disks (a tmpfs in a user + mount namespace: no root needed) ---------------------------
def _namespaces_work() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt 2>/dev/null || mount -t tmpfs tmpfs /tmp"],
        capture_output=True).returncode == 0


def _in_small_disk(tmp_path: Path, mount: Path, prepare: str, commands) -> subprocess.CompletedProcess:
    """Run ``commands`` (argument lists) in a namespace where ``mount`` is an 8 MiB tmpfs; ``prepare`` fills
    it or makes it read-only. Only the last command's status and output count."""
    mount.mkdir(parents=True, exist_ok=True)
    lines = [f"mount -t tmpfs -o size=8m tmpfs {shlex.quote(str(mount))}"]
    for i, argv in enumerate(commands):
        if i == len(commands) - 1:
            lines.append(prepare)
        lines.append(" ".join(shlex.quote(str(a)) for a in argv) + (" >/dev/null 2>&1" if i < len(commands) - 1 else ""))
    return subprocess.run(["unshare", "-rm", "bash", "-c", "\n".join(lines)], env=cli_env(tmp_path / "outputs"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.skipif(not _namespaces_work(), reason="needs unshare -rm (user + mount namespaces) to mount a tmpfs")
@pytest.mark.parametrize("case", ["full", "read-only", "resume read-only"])
def test_read_only_and_full_disks_end_in_one_line_naming_the_path(case, tmp_path):
    disk = tmp_path / "disk"
    train = [sys.executable, ROOT / "train.py"]
    root = f"paths.root='{disk}/my runs'"
    if case == "full":
        proc = _in_small_disk(tmp_path, disk, f"dd if=/dev/zero of={disk}/fill bs=64k 2>/dev/null || true",
                              [train + lm_cli_args(3) + [root]])
        line = assert_one_error_line(proc, f"{disk}/my runs/runs/", "no space left on the device")
    elif case == "read-only":
        proc = _in_small_disk(tmp_path, disk, f"mount -o remount,ro {disk}", [train + lm_cli_args(3) + [root]])
        line = assert_one_error_line(proc, f"{disk}/my runs", "Read-only file system", "paths.root=")
    else:  # a finished run on the small disk, then the disk turns read-only and the run is resumed
        runs = [train + lm_cli_args(2) + [root], ["bash", "-c", f"ls -d {shlex.quote(str(disk))}/my\\ runs/runs/*/* > {tmp_path}/dir"]]
        proc = _in_small_disk(tmp_path, disk, f"mount -o remount,ro {disk}",
                              runs + [["bash", "-c", f"exec {shlex.quote(sys.executable)} {ROOT / 'train.py'} "
                                       f"resume=\"'$(cat {tmp_path}/dir)'\" trainer.max_steps=4"]])
        line = assert_one_error_line(proc, "Read-only file system", "copy the run directory")
        assert str(disk / "my runs" / "runs") in line
    assert line.count("[train] error:") == 1
