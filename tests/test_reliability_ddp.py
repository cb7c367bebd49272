"""Under torchrun, a signal that reaches one rank only stops every rank after the same step (issue 10, item 1).

If the ranks stopped at different steps, the one still training would wait forever in its next collective;
the run would hang until the timeout instead of ending with a checkpoint of the step both ranks finished.
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

from conftest import ROOT, tiny_lm_overrides

from tasks.engine.training.checkpoint import load_checkpoint

TIMEOUT_S = 180


def children_with_rank(pid: int) -> dict:
    """{RANK: pid} of the worker processes torchrun started (Linux /proc)."""
    found = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            env = dict(v.split("=", 1) for v in Path(f"/proc/{child}/environ").read_text().split("\0") if "=" in v)
        except OSError:
            continue
        if "RANK" in env:
            found[int(env["RANK"])] = int(child)
    return found


@pytest.mark.slow
def test_sigterm_to_one_rank_stops_all_ranks_at_the_same_step(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled",
           "SRU_OUTPUTS": str(tmp_path / "outputs")}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(ROOT / "train.py"), *tiny_lm_overrides("sru", steps=100000), "trainer.eval_every_steps=10",
           "trainer.device=cpu", "test_after_training=false"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + TIMEOUT_S
    lasts = []
    while not lasts and time.time() < deadline and proc.poll() is None:
        lasts = list((tmp_path / "outputs" / "runs").glob("*/*/checkpoints/last.pt"))
        time.sleep(0.1)
    assert lasts, f"no checkpoint before the deadline:\n{proc.communicate(timeout=30)[1][-3000:]}"
    run_dir = lasts[0].parent.parent
    os.kill(children_with_rank(proc.pid)[1], signal.SIGTERM)  # rank 1 only; rank 0 learns it by all-reduce
    _, err = proc.communicate(timeout=TIMEOUT_S)
    assert "exitcode  : 75" in err or "exitcode: 75" in err or proc.returncode == 75, err[-3000:]
    assert err.count("SIGTERM: stopping after the current optimizer step") == 1  # only rank 1 got the signal
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
             if '"train"' in line]
    ckpt = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert ckpt["step"] == steps[-1] and len(ckpt["task_per_rank"]) == 2  # both ranks' state at that step
