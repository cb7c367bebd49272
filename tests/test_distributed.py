"""DDP helpers with a real 2-process gloo group (torchrun), plus their single-process behaviour."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tasks.engine.run import distributed as D

ROOT = Path(__file__).resolve().parents[1]


def torchrun(nproc, *args, cwd=ROOT, timeout=300, env=None):
    """Run `torchrun --standalone --nproc_per_node=nproc args...` and fail with its output if it fails."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.mark.slow
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
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit, match="hydra/launcher=slurm"):
        D.hydra_overrides_for_rank(0, argv=["train.py", "-m", "seed=1,2"])


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


# ---- train.py under torchrun: DDP equals one process on the same global batch ------------------------

NO_DROPOUT = ["task.emb_dropout=0", "task.out_dropout=0", "model.dropout=0", "model.rnn_dropout=0"]


def train_losses(run_dir):
    from tasks.engine.run_metrics import read_metrics

    return [r["loss"] for r in read_metrics(run_dir, "train")], [r["ppl"] for r in read_metrics(run_dir, "valid")]


def final_weights(run_dir):
    return torch.load(Path(run_dir) / "checkpoints" / "last.pt", map_location="cpu", weights_only=False)["model"]


def assert_same_weights(a, b, tol=1e-5):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name].float(), b[name].float(), rtol=tol, atol=tol), name


@pytest.mark.slow
def test_lm_ddp_two_processes_match_one_process_and_resume(run_train, tmp_path, monkeypatch):
    from conftest import tiny_lm_overrides

    for var in D.TORCHRUN_VARS:
        monkeypatch.delenv(var, raising=False)
    # global batch 4 = 2 ranks x 2 columns; 8 steps, evaluation every 4
    overrides = tiny_lm_overrides("sru", steps=8) + NO_DROPOUT
    run_train(overrides, tmp_path / "single")

    single_losses, single_ppl = train_losses(tmp_path / "single")

    # 4 steps under DDP, stop, resume to 8 (per-rank LM hidden states restored) == the uninterrupted single run
    first_half = [o for o in overrides if not o.startswith("trainer.max_steps")] + ["trainer.max_steps=4"]
    before = set(os.listdir(ROOT))
    torchrun(2, "train.py", *first_half, f"paths.root={tmp_path / 'root'}", "trainer.progress_bar=true")
    # only rank 0 wrote: ONE run dir (rank 1 did not create its own) holding everything, and no Hydra
    # files in the working directory
    run_dirs = [p.parent for p in (tmp_path / "root").rglob(".hydra")]
    assert len(run_dirs) == 1, run_dirs
    ddp = run_dirs[0]
    assert (ddp / "results.json").is_file() and (ddp / "checkpoints" / "last.pt").is_file()
    assert not {"train.log", ".hydra"} & (set(os.listdir(ROOT)) - before)
    assert train_losses(ddp)[0] == pytest.approx(single_losses[:4], rel=1e-5)

    out = torchrun(2, "train.py", f"resume={ddp}", "trainer.max_steps=8")
    assert "max parameter difference between ranks 0" in out.stdout  # replicas identical at the end
    ddp_losses, ddp_ppl = train_losses(ddp)
    assert ddp_losses == pytest.approx(single_losses, rel=1e-5)
    assert ddp_ppl == pytest.approx(single_ppl, rel=1e-5)
    assert_same_weights(final_weights(ddp), final_weights(tmp_path / "single"))


CLASSIFICATION = [
    "task=classification", "model=sru", "model.hidden_size=16", "model.num_layers=2", "model.dropout=0.0",
    "model.rnn_dropout=0.0", "task.data.name=null", "task.data.source=files",
    f"task.data.files.train={ROOT / 'tests/fixtures/classification/reviews.csv'}",
    f"task.data.files.test={ROOT / 'tests/fixtures/classification/reviews.csv'}",
    # 24 reviews: 4 validation, 20 training = 5 global batches of 4 (2 per rank); eval batch 3 over 2 ranks
    "task.data.valid_fraction=0.17", "task.embedding.dim=16", "task.embedding.path=null",
    "task.embedding.normalize=false", "task.batch_size=4", "task.eval_batch_size=3",
    "task.dropout=0.0",
    "trainer.optimizer.name=adam", "trainer.optimizer.lr=0.01", "trainer.optimizer.weight_decay=0",
    "trainer.max_epochs=2", "trainer.log_every_steps=1", "trainer.progress_bar=false", "trainer.plot=false",
    "trainer.num_threads=1", "logger=csv", "seed=0",
]


@pytest.mark.slow
def test_classification_ddp_two_processes_match_one_process(run_train, tmp_path, monkeypatch):
    for var in D.TORCHRUN_VARS:
        monkeypatch.delenv(var, raising=False)
    single = run_train(CLASSIFICATION, tmp_path / "single")
    ddp = tmp_path / "ddp"
    torchrun(2, "train.py", *CLASSIFICATION, f"hydra.run.dir={ddp}")
    from tasks.engine.run_metrics import read_metrics

    s_train, d_train = read_metrics(tmp_path / "single", "train"), read_metrics(ddp, "train")
    assert [r["loss"] for r in d_train] == pytest.approx([r["loss"] for r in s_train], rel=1e-5)
    # evaluation shards (uneven: eval batch 3) sum to the same accuracy as one process
    s_valid, d_valid = read_metrics(tmp_path / "single", "valid"), read_metrics(ddp, "valid")
    assert [r["accuracy"] for r in d_valid] == pytest.approx([r["accuracy"] for r in s_valid])
    summary = json.loads((ddp / "results.json").read_text())
    assert summary["test"]["accuracy"] == pytest.approx(single["test"]["accuracy"])
    assert_same_weights(final_weights(ddp), final_weights(tmp_path / "single"))
