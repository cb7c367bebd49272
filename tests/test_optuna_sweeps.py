"""The Optuna sweeper (hydra_plugins/sru_optuna_sweeper) through the real train.py, on SQLite (and journal
file) studies: parallel workers, a killed and restarted worker, pruning, submitit jobs with DDP ranks.
Read back with optuna itself."""
import importlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, tiny_lm_overrides

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402

SEARCHED = ("trainer.optimizer.lr=", "task.emb_dropout=", "task.out_dropout=")


def storage_url(tmp_path, kind="sqlite"):
    return f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else str(tmp_path / "study.journal")


def sweep_args(tmp_path, n_trials, steps=12, extra=(), storage="sqlite"):
    fixed = [o for o in tiny_lm_overrides("sru", steps=steps) if not o.startswith(SEARCHED)]
    return ["train.py", "hparams_search=lm_optuna", *fixed, "model.hidden_size=16", "model.num_layers=1",
            f"hydra.sweeper.storage={storage_url(tmp_path, storage)}", f"hydra.sweeper.n_trials={n_trials}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", "hydra.sweeper.heartbeat_interval=1",
            "hydra.sweeper.grace_period=4", *extra]


def start(args, log_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    log = open(log_path, "w")
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def finish(proc, log_path, timeout=400):
    assert proc.wait(timeout=timeout) == 0, f"worker failed:\n{log_path.read_text()[-4000:]}"


def load(tmp_path, storage="sqlite"):
    from tasks.engine.sweeps.study import open_storage

    return optuna.load_study(study_name="lm_optuna", storage=open_storage(storage_url(tmp_path, storage)))


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["sqlite", "journal"])
def test_two_workers_share_one_study(tmp_path, storage):
    workers = [start(sweep_args(tmp_path, 4, storage=storage), tmp_path / f"worker{i}.log") for i in range(2)]
    for i, proc in enumerate(workers):
        finish(proc, tmp_path / f"worker{i}.log")
    trials = load(tmp_path, storage).trials
    assert [t.number for t in trials] == [0, 1, 2, 3]  # exactly the asked number: none lost, none extra
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert len({t.user_attrs["worker"] for t in trials}) == 2  # both workers pulled trials
    assert len({tuple(sorted(t.params.items())) for t in trials}) == 4  # no duplicated suggestion
    for t in trials:  # each trial trained once, in its own run dir, and reported what it trained to
        summary = json.loads((tmp_path / "sweep" / str(t.number) / "results.json").read_text())
        assert summary["best_valid"] == t.value and t.user_attrs["steps"] == 12
    table = (tmp_path / "sweep" / "trials.csv").read_text().splitlines()
    assert len(table) == 5 and all(",COMPLETE," in row for row in table[1:])
    assert (tmp_path / "sweep" / "optimization.png").stat().st_size > 0


@pytest.mark.slow
def test_killed_sweep_restarts_and_retries_the_interrupted_trial(tmp_path):
    args = sweep_args(tmp_path, 3, steps=80)
    proc = start(args, tmp_path / "first.log")
    metrics = tmp_path / "sweep" / "1" / "metrics.jsonl"  # trial 1 is training: kill the worker mid-trial
    deadline = time.time() + 300
    while not (metrics.is_file() and '"train"' in metrics.read_text()):
        assert proc.poll() is None and time.time() < deadline, (tmp_path / "first.log").read_text()[-3000:]
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # no handler runs: the trial stays RUNNING in the study
    proc.wait()
    assert [t.state for t in load(tmp_path).trials] == [TrialState.COMPLETE, TrialState.RUNNING]

    restarted = start(args, tmp_path / "second.log")
    finish(restarted, tmp_path / "second.log")
    trials = load(tmp_path).trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(complete) == 3 and [t.number for t in failed] == [1]  # finished trial 0 was kept
    retry = next(t for t in complete if t.system_attrs.get("failed_trial") == 1)
    assert retry.params == failed[0].params  # the interrupted trial ran again, with its parameters
    assert "heartbeat" in failed[0].user_attrs["interrupted"] and not retry.user_attrs["interrupted"]
    assert not (tmp_path / "sweep" / "1" / "results.json").exists()


@pytest.mark.slow
def test_median_pruner_stops_a_bad_trial_early(tmp_path):
    # two good trials then a deliberately bad one (a learning rate that learns nothing), queued in this order
    study = optuna.create_study(study_name="lm_optuna", storage=f"sqlite:///{tmp_path / 'study.db'}")
    for lr in (0.03, 0.03, 1e-7):
        study.enqueue_trial({"trainer.optimizer.lr": lr})
    # only the learning rate is searched: the other keys are fixed on the command line
    extra = ["model.dropout=0", "model.rnn_dropout=0", "task.emb_dropout=0", "task.out_dropout=0",
             "hydra/sweeper/pruner=median", "hydra.sweeper.pruner.n_startup_trials=2"]
    proc = start(sweep_args(tmp_path, 3, steps=24, extra=extra), tmp_path / "worker.log")
    finish(proc, tmp_path / "worker.log")
    trials = load(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED]
    bad = tmp_path / "sweep" / "2"
    pruned = json.loads((bad / "pruned.json").read_text())
    assert pruned["step"] == 4 and trials[2].user_attrs["steps"] == 4  # its first validation, of 6
    assert pruned["monitor"] == "ppl" and trials[2].intermediate_values == {4: pruned["value"]}
    assert sorted(trials[0].intermediate_values) == [4, 8, 12, 16, 20, 24]  # every validation reported
    assert pruned["value"] > trials[0].intermediate_values[4]
    assert not (bad / "failure.json").exists() and not (bad / "results.json").exists()
    assert (bad / "checkpoints" / "last.pt").is_file()  # stopped cleanly: after its validation's save
    assert "pruned: 1" in (tmp_path / "sweep" / "optimization_results.yaml").read_text()


def test_search_space_syntax_and_fixed_keys():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from tasks.engine.sweeps.study import search_space, trial_overrides

    params = {"trainer.optimizer.lr": "tag(log, interval(1e-4, 1e-2))", "model.dropout": "interval(0, 0.5)",
              "model.num_layers": "range(1, 4)", "model.name_x": "choice(a, b)"}
    space, fixed = search_space(params, ["model.dropout=0.1", "model.hidden_size=64,128", "seed=3"])
    assert space["trainer.optimizer.lr"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert space["model.num_layers"] == IntDistribution(1, 3)  # range's stop is excluded, like Python's
    assert space["model.name_x"] == CategoricalDistribution(["a", "b"])
    assert space["model.hidden_size"] == CategoricalDistribution([64, 128])  # a command-line sweep joins
    assert "model.dropout" not in space and fixed == ["model.dropout=0.1", "seed=3"]  # a plain value is fixed
    assert trial_overrides({"trainer.optimizer.lr": 0.001, "x": None, "y": True}, fixed) == [
        "model.dropout=0.1", "seed=3", "trainer.optimizer.lr=0.001", "x=null", "y=true"]
    with pytest.raises(ValueError, match="range"):
        search_space({"a": "range(0.5, 2.5)"}, [])


def test_sweeper_config_groups_compose():
    from hydra import compose, initialize_config_dir

    importlib.import_module("tasks.engine.train.runner")  # registers the config resolvers

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["hparams_search=lm_optuna", "hydra/sweeper/pruner=successive_halving",
                                           "hydra.sweeper.pruner.reduction_factor=3"], return_hydra_config=True)
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.sru_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert sweeper.sampler._target_ == "optuna.samplers.TPESampler" and sweeper.sampler.n_startup_trials == 5
    assert sweeper.pruner._target_ == "optuna.pruners.SuccessiveHalvingPruner" and sweeper.pruner.reduction_factor == 3
    assert sweeper.direction == "minimize" and "trainer.optimizer.lr" in sweeper.params


@pytest.mark.slow
def test_submitit_jobs_with_two_ddp_ranks_report_and_prune(tmp_path):
    # the hydra/launcher=slurm code path on this machine: trials 0 and 1 run side by side as two jobs of one
    # batch, each job 2 DDP ranks, reporting to the SQLite study from their own processes; trial 2 (queued bad)
    # is pruned at its first validation, and both of its ranks stop there
    study = optuna.create_study(study_name="lm_optuna", storage=f"sqlite:///{tmp_path / 'study.db'}")
    for lr in (0.03, 0.02, 1e-7):
        study.enqueue_trial({"trainer.optimizer.lr": lr})
    extra = ["model.dropout=0", "model.rnn_dropout=0", "task.emb_dropout=0", "task.out_dropout=0",
             "hydra/launcher=local", "hydra.launcher.tasks_per_node=2", "hydra.sweeper.n_jobs=2",
             "hydra/sweeper/pruner=median", "hydra.sweeper.pruner.n_startup_trials=2"]
    proc = start(sweep_args(tmp_path, 3, extra=extra), tmp_path / "worker.log")
    finish(proc, tmp_path / "worker.log", timeout=600)
    trials = load(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED]
    assert all(sorted(t.intermediate_values) == [4, 8, 12] for t in trials[:2])  # reported by the jobs
    assert json.loads((tmp_path / "sweep" / "2" / "pruned.json").read_text())["step"] == 4
    logs = {p.name: p.read_text() for p in (tmp_path / "sweep" / ".submitit").glob("*/*_log.out")}
    rank0 = [text for name, text in logs.items() if name.endswith("_0_log.out")]
    assert sum("DDP: 2 processes" in text for text in rank0) == 2  # trials 0 and 1 finished under DDP
    pruned = sorted(name for name, text in logs.items() if "pruned at step 4" in text)
    assert len(pruned) == 2 and pruned[0].endswith("_0_log.out")  # both ranks of trial 2's job stopped
