"""A Hydra sweeper on current Optuna: every process running it is one worker of a shared study.

    python train.py hparams_search=lm_optuna hydra.sweeper.storage=sqlite:///lm.db   # start it N times

A worker loops: (under a lock on the storage file) fail the trials of killed workers and re-queue them,
count the study's trials, ask for up to ``n_jobs`` new ones while complete + pruned + running < ``n_trials``;
launch them through the Hydra launcher (in this process, or as SLURM jobs with ``hydra/launcher=slurm``);
tell each trial's outcome from its run dir: ``pruned.json`` -> PRUNED, ``failure.json`` or a failed job ->
FAIL, else COMPLETE with the value train.py returned. It stops when the study holds ``n_trials`` finished
trials, then writes the results (table, best overrides, figure; tasks/engine/sweeps/results.py) into the
sweep dir. Trial ``k`` runs in ``<sweep dir>/<k>`` and its sampler is seeded with ``seed + k``, so workers
started side by side never draw the same suggestions and a rerun draws the same ones.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, List, Optional

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sru_optuna_sweeper import config as _config  # noqa: F401  (registers the config groups)

log = logging.getLogger(__name__)
WORKER = f"{socket.gethostname()}:{os.getpid()}"  # recorded on each trial this process runs


class OptunaSweeper(Sweeper):
    def __init__(self, direction: str, study_name: str, storage: Optional[str], n_trials: int, n_jobs: int,
                 max_failures: Optional[int], heartbeat_interval: float, grace_period: Optional[float],
                 max_retry: Optional[int], sampler: Any, pruner: Any, params: Any, trial_number: Optional[int] = None):
        from tasks.engine.errors import RunError
        from tasks.engine.sweeps.storage import check_storage

        try:  # before the sweep dir exists: a refused sweep leaves nothing behind
            if direction not in ("minimize", "maximize"):
                raise ValueError(f"hydra.sweeper.direction={direction!r}: use minimize or maximize")
            if n_trials < 1 or n_jobs < 1:
                raise ValueError(f"hydra.sweeper.n_trials={n_trials}, n_jobs={n_jobs}: both must be at least 1")
            check_storage(storage)
        except (ValueError, RunError) as err:  # one line, like train.py's; Hydra lets SystemExit through
            print(f"[train] error: {err}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None
        self.direction, self.study_name, self.storage_url = direction, study_name, storage
        self.n_trials, self.n_jobs, self.max_failures, self.max_retry = n_trials, n_jobs, max_failures, max_retry
        self.heartbeat_interval = float(heartbeat_interval)
        self.grace_period = float(grace_period) if grace_period is not None else 4 * self.heartbeat_interval
        self.sampler_cfg, self.pruner_cfg = sampler, pruner
        self.params = (OmegaConf.to_container(params, resolve=True) if isinstance(params, DictConfig)
                       else dict(params or {}))

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)
        self.sweep_dir = Path(config.hydra.sweep.dir)

    # ---- the worker loop ----------------------------------------------------------------------------
    def sweep(self, arguments: List[str]) -> None:
        from tasks.engine.sweeps import results as sweep_results
        from tasks.engine.sweeps import study as sweeps

        self.space, self.fixed = self.checked_space(arguments)
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, self.sweep_dir / "multirun.yaml")
        self.retry = sweeps.retry_callback(self.max_retry)
        with self.storage_lock():
            study = self.open_study()
        heartbeat = sweeps.Heartbeat(study._storage, self.heartbeat_interval) if self.storage_url else None
        log.info("Optuna %s: study %r in %s, %d trials to finish, search space %s", _optuna_version(),
                 self.study_name, self.storage_url or "memory", self.n_trials, sorted(self.space))
        try:
            while True:
                trials, finished = self.ask_batch(study, heartbeat)
                if not trials:
                    if finished >= self.n_trials:
                        break
                    # the rest run in other workers (or a killed worker's trial awaits its grace period)
                    time.sleep(min(self.heartbeat_interval, self.grace_period / 2))
                    continue
                self.run_batch(study, trials, heartbeat)
        finally:
            if heartbeat is not None:
                heartbeat.close()
            sweeps.IN_PROCESS_STUDIES.pop(self.study_name, None)
            try:  # also when stopped: the table shows where the study is
                sweep_results.write_results(study, self.sweep_dir, self.fixed)
            except Exception as err:  # noqa: BLE001 - never hide the error that stopped the sweep
                log.error("could not write the sweep results into %s: %s", self.sweep_dir, err)

    def checked_space(self, arguments: List[str]):
        """The search space, refused in one line before the sweep dir or trial 1 when no trial could run it
        (reversed or non-positive log bounds, a key that does not exist, a value outside the schema's range)."""
        from tasks.engine.train.runner import check_before_work
        from tasks.engine.sweeps import study as sweeps
        from tasks.engine.sweeps.space_check import check_space_values

        try:
            space, fixed = sweeps.search_space(self.params, arguments)
            check_space_values(space, self.config, check_before_work)
        except ValueError as err:
            print(f"[train] error: {' '.join(str(err).split())}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None
        return space, fixed

    def open_study(self):
        import optuna

        from tasks.engine.sweeps import study as sweeps

        storage = sweeps.open_storage(self.storage_url)
        study = optuna.create_study(study_name=self.study_name, storage=storage, direction=self.direction,
                                    pruner=self.instantiate(self.pruner_cfg), load_if_exists=True)
        if study.direction.name.lower() != self.direction:
            raise ValueError(f"study {self.study_name!r} in {self.storage_url} was created to "
                             f"{study.direction.name.lower()}, this sweep asks to {self.direction}: use another "
                             f"hydra.sweeper.study_name or the study's direction")
        if self.storage_url is None:
            sweeps.IN_PROCESS_STUDIES[self.study_name] = study  # jobs in this process report to it
        return study

    @contextlib.contextmanager
    def storage_lock(self):
        """Workers sharing a storage file count and ask one at a time, so together they ask exactly n_trials.
        Optuna's NFS-safe journal lock; a lock left by a killed worker is broken after 30 s."""
        from tasks.engine.sweeps import study as sweeps

        path = sweeps.storage_file(self.storage_url)
        if path is None:  # in memory (one worker) or a database server: see docs/sweeps.md
            yield
            return
        from optuna.storages.journal import JournalFileOpenLock

        path.parent.mkdir(parents=True, exist_ok=True)
        lock = JournalFileOpenLock(str(path) + ".ask", grace_period=30)
        lock.acquire()
        try:
            yield
        finally:
            lock.release()

    def ask_batch(self, study, heartbeat):
        """Up to n_jobs new trials (re-queued ones first) and the number of finished trials of the study."""
        from optuna.trial import TrialState

        from tasks.engine.sweeps import study as sweeps

        with self.storage_lock():
            failed = sweeps.fail_stale_trials(study, self.grace_period, self.retry) if self.storage_url else []
            if failed:
                log.warning("trials %s: their worker stopped; marked failed and re-queued", failed)
            trials = study.get_trials(deepcopy=False)
            states = [t.state for t in trials]
            finished = states.count(TrialState.COMPLETE) + states.count(TrialState.PRUNED)
            crashed = sum(t.state == TrialState.FAIL and "failure" in t.user_attrs for t in trials)
            if self.max_failures is not None and crashed > self.max_failures:
                # one line and status 1, as for any failed sweep; sweep()'s `finally` still writes the results
                print(f"[train] error: study {self.study_name!r}: {crashed} trials crashed (more than "
                      f"hydra.sweeper.max_failures={self.max_failures}); see {self.sweep_dir}/failures.jsonl and "
                      f"the trials' failure.json", file=sys.stderr, flush=True)
                raise SystemExit(1)
            free = self.n_trials - finished - states.count(TrialState.RUNNING)
            asked = []
            for _ in range(max(0, min(self.n_jobs, free))):
                study.sampler = self.instantiate(self.sampler_cfg, seed_offset=len(trials) + len(asked))
                trial = study.ask(self.space)
                trial.set_user_attr("run_dir", str(self.sweep_dir / str(trial.number)))
                trial.set_user_attr("worker", WORKER)
                if trial.user_attrs.get("interrupted"):  # a re-queued copy carries its original's attrs
                    trial.set_user_attr("interrupted", None)
                if heartbeat is not None:
                    heartbeat.add(trial._trial_id)
                asked.append(trial)
        return asked, finished

    def run_batch(self, study, trials, heartbeat) -> None:
        from tasks.engine.sweeps import study as sweeps

        jobs = [sweeps.trial_overrides(t.params, self.fixed)
                + [f"hydra.sweeper.trial_number={t.number}", f"hydra.sweep.subdir={t.number}"] for t in trials]
        try:
            returns = self.launcher.launch(jobs, initial_job_idx=trials[0].number)
        except BaseException as stop:  # Ctrl-C / SIGTERM / a launcher error: the trials go back to the queue
            for t in trials:
                sweeps.fail_trial(study, t._trial_id, f"the sweep stopped ({type(stop).__name__})", self.retry)
            raise
        finally:
            for t in trials:
                if heartbeat is not None:
                    heartbeat.remove(t._trial_id)
        for trial, ret in zip(trials, returns):
            self.tell(study, trial, ret)

    def tell(self, study, trial, ret) -> None:
        """Record one launched trial's outcome, read from its run dir and the job's return."""
        from hydra.core.utils import JobStatus
        from optuna.trial import TrialState

        from tasks.engine.sweeps import results as sweep_results

        run_dir = Path(trial.user_attrs["run_dir"])
        outcome = sweep_results.read_run_dir(run_dir)
        if outcome.get("steps") is not None:
            trial.set_user_attr("steps", outcome["steps"])
        value = ret.return_value if ret.status == JobStatus.COMPLETED else None
        if outcome["state"] == "pruned":
            study.tell(trial, state=TrialState.PRUNED)
        elif outcome["state"] == "failed" or not isinstance(value, (int, float)) or not math.isfinite(value):
            error = outcome.get("error") or (f"job {ret.status.name}: {ret._return_value!r}"
                                             if ret.status != JobStatus.COMPLETED else f"returned {value!r}")
            trial.set_user_attr("failure", str(error)[:500])
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, float(value))
        log.info("trial %d: %s %s (%s)", trial.number, outcome["state"], "" if value is None else value, run_dir)

    def instantiate(self, node: Any, seed_offset: int = 0):
        """A sampler/pruner from its config; a seeded sampler gets ``seed + seed_offset`` (one per trial)."""
        from hydra.utils import instantiate

        if node is None:
            return None
        kwargs = {}
        if "seed" in node and node.seed is not None:
            kwargs["seed"] = int(node.seed) + seed_offset
        return instantiate(node, **kwargs)


def _optuna_version() -> str:
    import optuna

    return optuna.__version__
