"""Divergence, bad config, bad data, full disk, resume bookkeeping (issue 10, items 2, 3, 4, 6, 7).

Each test runs the real pipeline (tasks.engine.train.runner.run) on the tiny LM fixture or calls the real function.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import pytest
import torch
from conftest import compose, tiny_lm_overrides
from omegaconf import OmegaConf

from tasks.engine.train import runner
from tasks.engine.training.checkpoint import check_same_shapes, copy_atomic, load_checkpoint, save_atomic
from tasks.engine.errors import (CheckpointWriteError, DataError, NonFiniteError, ResumeError,
                                 RunLockedError)
from tasks.engine.run_metrics import read_metrics
from tasks.engine.run.lock import RunLock


# ---- item 2: nothing non-finite is ever saved ------------------------------------------------------
@pytest.mark.slow
def test_sgd_explosion_never_reaches_last_or_best(run_train, tmp_path):
    # lr=1e6 without clipping: the weights leave the finite range within a few steps
    good = tiny_lm_overrides("lstm", steps=4) + ["trainer.optimizer.name=sgd", "trainer.optimizer.lr=1.0",
                                                 "trainer.grad_clip=null"]
    run_train(good, tmp_path)  # a healthy checkpoint at step 4 ...
    before = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    bad = good + ["trainer.optimizer.lr=1e6", "trainer.max_steps=40", f"resume={tmp_path}"]
    with pytest.raises(NonFiniteError) as err:
        run_train(bad, tmp_path)  # ... then a resumed run diverges
    message = str(err.value)
    assert "at step" in message and str(tmp_path / "checkpoints" / "last.pt") in message
    assert "(step 4)" in message and "lower trainer.optimizer.lr" in message and f"resume={tmp_path}" in message
    for name in ("last.pt", "best.pt"):
        ckpt = load_checkpoint(tmp_path / "checkpoints" / name)
        assert ckpt["step"] == 4, name
        assert all(torch.isfinite(t).all() for t in ckpt["model"].values())
        assert all(torch.equal(t, before["model"][k]) for k, t in ckpt["model"].items())


@pytest.mark.slow
def test_nan_before_any_checkpoint_says_so(run_train, tmp_path):
    bad = tiny_lm_overrides("sru", steps=8) + ["trainer.optimizer.name=adam", "trainer.optimizer.lr=1e30",
                                               "trainer.grad_clip=null"]
    with pytest.raises(NonFiniteError, match="no checkpoint was written yet"):
        run_train(bad, tmp_path)
    assert not (tmp_path / "checkpoints" / "last.pt").exists()


@pytest.mark.slow
def test_adam_huge_lr_with_clipping_no_longer_ends_successfully(run_train, tmp_path):
    # the row: Adam lr=1e6 with the default clipping (5.0) reached a loss of 1.6e32 and exit 0
    bad = tiny_lm_overrides("sru", steps=12) + ["trainer.optimizer.lr=1e6", "trainer.grad_clip=5.0"]
    with pytest.raises(NonFiniteError, match="no checkpoint was written yet"):
        run_train(bad, tmp_path)
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.slow
def test_exploding_loss_is_caught_before_inf_when_enabled(run_train, tmp_path):
    # Adam lr=1e6 with clipping: losses stay finite (1e32), so without this check the run ends "successfully"
    # Adam lr=1 with clipping: train losses 4, 217, 1044, ... all finite (measured)
    bad = tiny_lm_overrides("sru", steps=40) + ["trainer.optimizer.lr=1.0", "trainer.grad_clip=1.0",
                                                "trainer.explosion.factor=3", "trainer.explosion.patience=2",
                                                "trainer.explosion.warmup_steps=0"]
    with pytest.raises(NonFiniteError, match=r"at step 3: .*no checkpoint was written yet") as err:
        run_train(bad, tmp_path)
    assert "above 3 x its running level 3.96" in str(err.value) and "for 2 steps (trainer.explosion)" in str(err.value)
    # off by default: the same run is stopped only by its first validation, where ppl = exp(loss) is inf
    with pytest.raises(NonFiniteError, match=r"non-finite validation ppl inf \(loss .*\) at step 4"):
        run_train(bad[:-3], tmp_path / "default")


def test_perplexity_is_not_capped():
    from tasks.lm.task import LanguageModelingTask

    task = LanguageModelingTask(compose(tiny_lm_overrides()))
    metrics = task.reduce_metrics({"loss_sum": 800.0, "ntokens": 1})
    assert metrics["loss"] == 800.0 and metrics["ppl"] == float("inf")  # not exp(50)


# ---- item 6: config checked before any work: the rows are in tests/test_bad_inputs.py ------------------


def test_empty_validation_file_names_file_split_and_key(run_train, tmp_path):
    empty = tmp_path / "valid.txt"
    empty.write_text("")
    with pytest.raises(DataError) as err:
        run_train(tiny_lm_overrides("sru", steps=4) + [f"task.data.valid_file={empty}"], tmp_path / "run")
    assert f"LM split 'valid' from task.data.valid_file={empty} has 0 tokens and is empty" in str(err.value)
    short = tmp_path / "short.txt"
    short.write_text("a b c\n")
    with pytest.raises(DataError, match=r"'test' .* too short for task.eval_batch_size=4"):
        run_train(tiny_lm_overrides("sru", steps=4) + [f"task.data.test_file={short}"], tmp_path / "run2")


# ---- item 7: full disk ----------------------------------------------------------------------------
@pytest.mark.slow
def test_full_disk_keeps_previous_checkpoints_and_says_no_space_left(run_train, tmp_path, monkeypatch):
    run_train(tiny_lm_overrides("lstm", steps=4), tmp_path)
    before = {n: (tmp_path / "checkpoints" / n).read_bytes() for n in ("last.pt", "best.pt")}
    real_save = torch.save

    def full_disk(obj, f, *args, **kwargs):  # half a zip written, then the device is full
        f.write(b"PK\x03\x04" + b"\0" * 1000)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(CheckpointWriteError) as err:
        run_train(tiny_lm_overrides("lstm", steps=8) + [f"resume={tmp_path}"], tmp_path)
    message = str(err.value)
    assert "\n" not in message and "no space left" in message and str(tmp_path / "checkpoints") in message
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["best.pt", "last.pt"]  # no .tmp
    assert {n: (tmp_path / "checkpoints" / n).read_bytes() for n in before} == before

    monkeypatch.setattr(torch, "save", real_save)

    def full_disk_copy(src, dst):  # best.pt is a copy of last.pt: the copy fails the same way
        with open(dst, "wb") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    other = tmp_path / "other"
    save_atomic({"model": {}, "step": 0}, other / "last.pt")
    monkeypatch.setattr(shutil, "copyfile", full_disk_copy)
    with pytest.raises(CheckpointWriteError, match=f"best.pt in {other}: no space left"):
        copy_atomic(other / "last.pt", other / "best.pt")
    assert sorted(p.name for p in other.iterdir()) == ["last.pt"]


# ---- item 3: resume bookkeeping and ownership -----------------------------------------------------
@pytest.mark.slow
def test_resume_drops_records_logged_after_the_checkpoint(run_train, tmp_path):
    run_train(tiny_lm_overrides("sru", steps=8), tmp_path)
    # a crash after step 8's checkpoint would have left records of steps 9-10 behind
    with open(tmp_path / "metrics.jsonl", "a") as f:
        for step in (9, 10):
            f.write(json.dumps({"split": "train", "step": step, "loss": 1.0}) + "\n")
    with open(tmp_path / "metrics_train.csv", "a") as f:
        f.write("train,9,0,0.1,1.0\n")
    run_train(tiny_lm_overrides("sru", steps=12) + [f"resume={tmp_path}"], tmp_path)
    for split in ("train", "valid"):
        steps = [r["step"] for r in read_metrics(tmp_path, split)]
        assert steps == sorted(set(steps)), split
    csv_steps = [line.split(",")[1] for line in (tmp_path / "metrics_train.csv").read_text().splitlines()[1:]]
    assert csv_steps == [str(s) for s in range(1, 13)]


def _fake_run(root, stamp, run_name, checkpoint):
    run_dir = root / "runs" / stamp.split("/")[0] / stamp.split("/")[1]
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(f"run_name: {run_name}\n")
    if checkpoint:
        (run_dir / "checkpoints").mkdir()
        (run_dir / "checkpoints" / "last.pt").write_bytes(b"x")
    return run_dir


def test_resume_true_picks_newest_run_of_the_same_name_and_refuses_one_without_checkpoint(tmp_path, capsys):
    runner.find_latest_run.cache_clear()
    older = _fake_run(tmp_path, "2026-01-01/10-00-00_1-aaaa", "lm-sru", checkpoint=True)
    _fake_run(tmp_path, "2026-01-02/09-00-00_2-bbbb", "classification-sru", checkpoint=True)
    assert runner.find_latest_run(str(tmp_path / "runs"), "lm-sru") == str(older)
    assert f"continuing {older}, the newest of 1 lm-sru run(s)" in capsys.readouterr().out
    runner.find_latest_run.cache_clear()
    dead = _fake_run(tmp_path, "2026-01-03/08-00-00_3-cccc", "lm-sru", checkpoint=False)
    (dead / "metrics.jsonl").write_text('{"split": "train", "step": 1, "loss": 5.0}\n')  # it trained, then died
    never = _fake_run(tmp_path, "2026-01-04/08-00-00_4-dddd", "lm-sru", checkpoint=False)  # killed while loading
    (never / "train.log").write_text("[train] run dir: ...\n")
    with pytest.raises(ResumeError) as err:
        runner.find_latest_run(str(tmp_path / "runs"), "lm-sru")
    message = str(err.value)
    assert str(dead) in message and "no checkpoints/last.pt yet" in message and f"resume={older}" in message
    assert f"passing over 1 lm-sru run dir(s) that never trained (no checkpoint, no metrics): {never}" \
        in capsys.readouterr().out
    runner.find_latest_run.cache_clear()


@pytest.mark.slow
def test_checkpoint_of_another_model_size_is_refused(run_train, tmp_path):
    run_train(tiny_lm_overrides("sru", steps=4), tmp_path / "a")
    run_train(tiny_lm_overrides("sru", steps=4) + ["model.hidden_size=16"], tmp_path / "b")
    # b's checkpoint (hidden 16) into a (hidden 32): its config and its weights disagree with the run
    shutil.copy(tmp_path / "b" / "checkpoints" / "last.pt", tmp_path / "a" / "checkpoints" / "last.pt")
    (tmp_path / "a" / ".hydra").mkdir()
    (tmp_path / "a" / ".hydra" / "config.yaml").write_text(
        json.dumps({"model": OmegaConf.to_container(compose(tiny_lm_overrides("sru")).model),
                    "task": load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")["config"]["task"]}))
    with pytest.raises(ResumeError, match=r"model.hidden_size \(checkpoint 16, run 32\)"):
        run_train(tiny_lm_overrides("sru", steps=8) + [f"resume={tmp_path / 'a'}"], tmp_path / "a")
    # without the .hydra record, the shapes still disagree with the config given
    from tasks.lm.model import LanguageModel

    ckpt = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")
    model = LanguageModel(ckpt["model"]["embed.weight"].shape[0], 32, compose(tiny_lm_overrides()).model)
    with pytest.raises(ResumeError, match=r"shapes differ .*\(.*16\) vs \(.*32\)"):
        check_same_shapes(ckpt["model"], model, tmp_path / "b" / "checkpoints" / "last.pt")


@pytest.mark.slow
def test_run_lock_refuses_live_owner_and_takes_over_stale_one(tmp_path, capsys):
    with RunLock(tmp_path):
        with pytest.raises(RunLockedError, match=f"in use by pid {os.getpid()}"):
            RunLock(tmp_path).acquire()
    assert not (tmp_path / "run.lock").exists()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "run.lock").write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename}))
    with RunLock(tmp_path):
        assert json.loads((tmp_path / "run.lock").read_text())["pid"] == os.getpid()
    assert f"stale lock {tmp_path / 'run.lock'} of pid {dead.pid}" in capsys.readouterr().out
    (tmp_path / "run.lock").write_text(json.dumps({"pid": 1, "host": "elsewhere"}))  # fresh heartbeat
    with pytest.raises(RunLockedError, match="host elsewhere"):
        RunLock(tmp_path).acquire()
    old = os.path.getmtime(tmp_path / "run.lock") - 3600
    os.utime(tmp_path / "run.lock", (old, old))  # its heartbeat stopped an hour ago
    with RunLock(tmp_path):
        pass



@pytest.mark.slow
def test_sigterm_in_process_finishes_wandb_and_writes_last_but_not_best(run_train, tmp_path, monkeypatch):
    import signal

    import wandb

    from tasks.engine.errors import TrainingInterrupted
    from tasks.engine.training.trainer import Trainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    original = Trainer.log_train

    def log_then_signal(self, *args):  # a real SIGTERM to this process, delivered during step 3
        original(self, *args)
        if self.progress.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(Trainer, "log_train", log_then_signal)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TrainingInterrupted) as stop:
        run_train(tiny_lm_overrides("sru", steps=12) + ["logger=wandb"], tmp_path)
    assert (stop.value.step, stop.value.checkpoint) == (3, tmp_path / "checkpoints" / "last.pt")
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["step"] == 3
    assert not (tmp_path / "checkpoints" / "best.pt").exists()  # no evaluation yet (every 4 steps)
    assert wandb.run is None  # the logger was finished
    assert signal.getsignal(signal.SIGTERM) is before  # the run's handlers are removed again
