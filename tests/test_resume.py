"""Exact resume (fairseq's reproducibility test) and checkpoint robustness."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, tiny_lm_overrides

from tasks.engine.training.checkpoint import load_checkpoint, save_atomic
from tasks.engine.run_metrics import read_metrics


def _train_losses(run_dir):
    return [(r["step"], r["loss"]) for r in read_metrics(run_dir, "train")]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["sru", "lstm"])
def test_stop_and_resume_matches_uninterrupted_run(model, run_train, tmp_path):
    # 10 steps straight vs 5 steps, stop, resume to 10. A 7-window training prefix with 2 micro-batches
    # per step makes epochs of 4 steps, so the stop falls mid-epoch and both runs cross epoch ends.
    # Dropout is on, so RNG, carried LM state and data position must all be restored exactly.
    n, k = 10, 5
    base = tiny_lm_overrides(model, steps=n) + ["trainer.accumulate=2", "task.emb_dropout=0.3",
                                                "task.data.max_train_tokens=240"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    run_train(base, straight)
    run_train(base + [f"trainer.max_steps={k}"], split)
    run_train(base + ["resume=" + str(split)], split)

    assert _train_losses(split) == _train_losses(straight)  # identical floats, step by step
    a = load_checkpoint(straight / "checkpoints" / "last.pt")
    b = load_checkpoint(split / "checkpoints" / "last.pt")
    assert a["step"] == b["step"] == n
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.slow
def test_truncated_checkpoint_gives_clear_error(run_train, tmp_path):
    run_train(tiny_lm_overrides("lstm", steps=4), tmp_path)
    last = tmp_path / "checkpoints" / "last.pt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match="corrupted or truncated.*resume=null"):
        run_train(tiny_lm_overrides("lstm", steps=8) + [f"resume={tmp_path}"], tmp_path)


def test_crash_during_save_keeps_previous_last(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_atomic({"model": {"w": torch.ones(3)}, "step": 1}, path)

    def crash(obj, f, *args, **kwargs):  # a save that dies half way (disk full, kill -9 ...)
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("No space left on device")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError):
        save_atomic({"model": {"w": torch.zeros(3)}, "step": 2}, path)
    monkeypatch.undo()
    good = load_checkpoint(path)
    assert good["step"] == 1 and torch.equal(good["model"]["w"], torch.ones(3))
    assert not (tmp_path / "last.pt.tmp").exists()


@pytest.mark.slow
def test_cli_resume_true_continues_latest_run_in_its_dir(tmp_path):
    """The real command line: a fresh run, then `resume=true` with a larger budget, same folder."""
    env = dict(os.environ, WANDB_MODE="disabled", SRU_OUTPUTS=str(tmp_path))
    args = [a for a in tiny_lm_overrides("lstm", steps=4) if not a.startswith("trainer.max_steps")]
    cmd = [sys.executable, str(ROOT / "train.py"), *args, "test_after_training=false"]
    subprocess.run(cmd + ["trainer.max_steps=4"], check=True, env=env, cwd=tmp_path, capture_output=True)
    first = [p.parent.parent for p in tmp_path.glob("runs/*/*/checkpoints/last.pt")]
    assert len(first) == 1
    out = subprocess.run(cmd + ["trainer.max_steps=8", "resume=true"], check=True, env=env, cwd=tmp_path,
                         capture_output=True, text=True)
    assert "resumed" in out.stdout
    runs = [p.parent.parent for p in tmp_path.glob("runs/*/*/checkpoints/last.pt")]
    assert runs == first  # no new run folder
    assert [s for s, _ in _train_losses(first[0])] == list(range(1, 9))
    assert load_checkpoint(first[0] / "checkpoints" / "last.pt")["step"] == 8
