"""DDP helpers with a real 2-process gloo group (torchrun), plus their single-process behaviour."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tasks import distributed as D

ROOT = Path(__file__).resolve().parents[1]


def torchrun(nproc, *args, cwd=ROOT, timeout=300, env=None):
    """Run `torchrun --standalone --nproc_per_node=nproc args...` and fail with its output if it fails."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def test_helpers_with_two_gloo_processes(tmp_path):
    torchrun(2, str(ROOT / "tests" / "distributed_worker.py"), str(tmp_path))
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (r0["world_size"], r1["world_size"]) == (2, 2)
    assert r0["is_main"] and not r1["is_main"]
    assert r0["summed"] == r1["summed"] == {"a": 3.0, "b": 3.0}
    assert r0["run_dir"] == r1["run_dir"] == "/runs/rank0"
    assert (r0["shard"], r1["shard"]) == ([0, 4], [4, 8])
    # accumulation with no_sync + the final synced micro-step == the full-batch gradient in one process
    assert r0["grad_max_err"] < 1e-6 and r1["grad_max_err"] < 1e-6
    assert r0["first_step_was_local"] and r1["first_step_was_local"]
    assert r0["weight"] == r1["weight"]  # DDP broadcast rank 0's parameters
    assert r0["gathered"] == [[0], [1]] and r1["gathered"] is None
    assert r0["replica_diff"] == r1["replica_diff"] == 0.0
    assert r0["diverged_diff"] > 0 and r0["diverged_diff"] == r1["diverged_diff"]


def test_single_process_fallbacks(monkeypatch):
    for var in D.TORCHRUN_VARS:
        monkeypatch.delenv(var, raising=False)
    info = D.setup(device="cpu")
    assert (info.rank, info.world_size, info.enabled) == (0, 1, False)
    assert D.is_main() and D.get_world_size() == 1
    assert D.all_reduce_sum({"n": 3}) == {"n": 3.0}
    assert D.broadcast_run_dir("/x") == "/x"
    assert D.gather_to_main({"t": torch.ones(1)})[0]["t"].tolist() == [1.0]
    assert D.max_replica_difference(torch.nn.Linear(2, 2)) == 0.0
    model = torch.nn.Linear(2, 2)
    assert D.wrap_model(model, info) is model and D.unwrap_model(model) is model
    with D.maybe_no_sync(model, sync=False):
        pass
    assert D.hydra_overrides_for_rank(0) == []
    assert "hydra.output_subdir=null" in D.hydra_overrides_for_rank(1)


def test_shard_slice_covers_batch_in_order():
    items = list(range(12))
    assert [items[D.shard_slice(12, rank=r, world_size=3)] for r in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7],
                                                                               [8, 9, 10, 11]]
    uneven = [items[:10][D.shard_slice(10, even=False, rank=r, world_size=4)] for r in range(4)]
    assert uneven == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    with pytest.raises(ValueError, match="multiple of 4"):
        D.shard_slice(10, rank=0, world_size=4)
    with pytest.raises(ValueError, match="at least 4"):
        D.shard_slice(3, even=False, rank=0, world_size=4)


def test_bad_device_and_missing_rendezvous(monkeypatch):
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda'"):
        D.setup(device="tpu")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="torchrun"):
        D.setup(device="cpu")
