"""Hydra multirun, the Optuna sweeper, the submitit launcher and failure reporting, via the real train.py.
(Shared studies, workers, restarts and pruning: tests/test_optuna_sweeps.py.)"""
import importlib
import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, tiny_lm_overrides

from tasks.engine.sweeps import collect as collect_results

# a few steps only: these tests check the sweep machinery, not learning
FAST = [o for o in tiny_lm_overrides("sru", steps=4) if not o.startswith("trainer.max_steps")] + [
    "trainer.max_steps=4", "model.hidden_size=16", "model.num_layers=1"]


def train(*args, timeout=300, status=0):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == status, f"train.py {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_multirun_grid_with_a_failing_job_finishes_and_reports_it(tmp_path):
    # 2 optimizers x 2 seeds = 4 jobs (Hydra varies the last key fastest); "bogus" is not an optimizer: jobs 2, 3 crash
    proc = train("-m", *FAST, "trainer.optimizer.name=adam,bogus", "seed=1,2", f"hydra.sweep.dir={tmp_path}", status=1)
    # each failed job says so in one line (its traceback is in its failure.json); the sweep ends with the count
    job_lines = [line for line in proc.stderr.splitlines() if line.startswith("[train] sweep job ")]
    assert [line.split(" failed: ")[0] for line in job_lines] == ["[train] sweep job 2", "[train] sweep job 3"]
    assert all(line.endswith(f"{tmp_path / n / 'failure.json'})") for line, n in zip(job_lines, "23"))
    assert proc.stderr.strip().splitlines()[-1] == f"[train] 2 of 4 jobs failed; see {tmp_path}/failures.jsonl"
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    ok = [tmp_path / str(n) for n in (0, 1)]
    failed = [tmp_path / str(n) for n in (2, 3)]
    for run in ok:  # one run dir per job, with its own config and results
        assert json.loads((run / "results.json").read_text())["steps"] == 4
        assert (run / ".hydra" / "overrides.yaml").is_file()
    for run in failed:
        assert "bogus" in json.loads((run / "failure.json").read_text())["error"]
    records = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert sorted(r["run_dir"] for r in records) == sorted(str(p) for p in failed)
    assert all("trainer.optimizer.name=bogus" in r["overrides"] for r in records)

    rows = {r["configuration"]: r for r in collect_results.main([str(tmp_path)])}
    adam, bogus = rows["trainer.optimizer.name=adam"], rows["trainer.optimizer.name=bogus"]
    assert (adam["runs"], adam["failed"], bogus["runs"], bogus["failed"]) == (2, 0, 2, 2)
    mean, std = adam["valid/best_ppl"]
    assert mean > 1 and std >= 0  # mean ± std over the two seeds
    assert (tmp_path / "results.md").is_file() and (tmp_path / "valid_curves.png").is_file()


@pytest.mark.slow
def test_optuna_sweep_two_trials(tmp_path):
    # keys given on the command line are fixed by the sweeper, so leave the searched ones out
    searched = ("trainer.optimizer.lr=", "task.emb_dropout=", "task.out_dropout=")
    fixed = [o for o in FAST if not o.startswith(searched)]
    train("hparams_search=lm_optuna", *fixed, "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path}")
    best = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    values = [json.loads((tmp_path / str(n) / "results.json").read_text())["best_valid"] for n in (0, 1)]
    assert best["best_value"] == min(values)  # the sweeper minimised the value train.py returned
    assert set(best["best_params"]) == {"trainer.optimizer.lr", "model.dropout", "model.rnn_dropout",
                                        "task.emb_dropout", "task.out_dropout"}
    # the overrides that rerun the best trial alone: the fixed keys and the best trial's sampled values
    assert f"trainer.optimizer.lr={best['best_params']['trainer.optimizer.lr']!r}" in best["best_overrides"]
    assert not any(o.startswith("hparams_search=") for o in best["best_overrides"])
    assert best["best_run_dir"] == str(tmp_path / str(best["best_trial"])) and best["total_steps"] == 8
    assert len((tmp_path / "trials.csv").read_text().splitlines()) == 3  # header + 2 trials
    assert (tmp_path / "optimization.png").is_file()


@pytest.mark.slow
def test_submitit_local_launcher_runs_one_job_as_two_ddp_ranks(tmp_path):
    # the hydra/launcher=slurm code path (pickled job, submitit environment) on this machine; 2 tasks = 2 ranks
    train("-m", *FAST, "hydra/launcher=local", "hydra.launcher.tasks_per_node=2", f"hydra.sweep.dir={tmp_path}")
    summary = json.loads((tmp_path / "0" / "results.json").read_text())
    assert summary["steps"] == 4
    rank0_log = next((tmp_path / ".submitit").glob("*/*_0_log.out")).read_text()
    assert "DDP: 2 processes, max parameter difference between ranks 0" in rank0_log


def test_slurm_launcher_config_has_documented_keys():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    importlib.import_module("tasks.engine.train.runner")  # registers the config resolvers

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=4",
                                           "hydra.launcher.partition=gpu"], return_hydra_config=True)
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=False)
    assert launcher["_target_"].endswith("SlurmLauncher")
    assert (launcher["partition"], launcher["nodes"], launcher["array_parallelism"]) == ("gpu", 1, 16)
    assert cfg.hydra.launcher.tasks_per_node == 4  # one DDP rank per GPU
    assert launcher["timeout_min"] > 0


def test_the_sweep_summary_counts_only_the_failures_of_this_sweep(tmp_path):
    """A rerun into the same hydra.sweep.dir finds the earlier sweep's lines in failures.jsonl: not its own."""
    import time

    from tasks.engine.sweeps.failures import failed_jobs, launched_jobs

    start = time.time()
    records = [{"run_dir": str(tmp_path / "0"), "unix_time": start - 3600}, {"run_dir": str(tmp_path / "1"),
                                                                              "unix_time": start + 1}]
    (tmp_path / "failures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn')
    for job in ("0", "1"):
        (tmp_path / job / ".hydra").mkdir(parents=True)
    assert failed_jobs(tmp_path, since=start) == 2  # job 1, and the torn line (a job that failed while writing)
    assert failed_jobs(tmp_path) == 3 and launched_jobs(tmp_path, since=start - 1) == 2
    assert failed_jobs(tmp_path / "nope") == 0
