"""Optuna sweeps: what the sweeper (``hydra_plugins/sru_optuna_sweeper``) and its jobs both need.

* ``open_storage``: a storage URL -> an Optuna storage. ``sqlite:///sweeps.db``, ``postgresql://...``
  (any SQLAlchemy URL), or a plain file path = Optuna's journal file storage (NFS clusters).
* ``search_space``: the ``params`` of ``conf/hparams_search/*.yaml`` (Hydra's sweep syntax:
  ``interval(a, b)``, ``tag(log, interval(a, b))``, ``choice(x, y)``, ``range(a, b)``) -> distributions.
* ``Heartbeat`` / ``fail_stale_trials``: a worker stamps each trial it runs every ``interval`` seconds; a
  RUNNING trial whose stamp is older than the grace period belongs to a killed worker: it is marked FAIL
  and re-queued (Optuna's ``RetryHeartbeatStaleTrialCallback``), so a restarted sweep retries it. The stamp is a
  trial system attr, so it works the same on every storage (RDB and journal).
* ``validation_callbacks_for_job``: the job side of pruning: a callback for ``fit(validation_callbacks=)``
  that reports each validation to the trial and raises ``TrialPruned`` when the pruner says stop.

Optuna is imported inside functions: train.py imports this module for every run, sweep or not.
"""
from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tasks.engine.run import distributed

HEARTBEAT_ATTR = "sru_heartbeat"   # trial system attr: time.time() of the running worker's last stamp
PRUNED_FILE = "pruned.json"        # in a pruned trial's run dir (a crashed one has failure.json instead)
# Studies of in-memory sweeps (storage: null), by name: a job run in the sweeper's process reports here.
IN_PROCESS_STUDIES: Dict[str, Any] = {}


class TrialPruned(BaseException):
    """The pruner stopped this trial. A BaseException like TrainingInterrupted: the crash reporting of sweeps
    (``except Exception`` in sweep_failures.report_failures) must not record a pruned trial as failed."""

    def __init__(self, number: int, step: int, value: float, monitor: str):
        super().__init__(f"Optuna trial {number} pruned at step {step} (valid {monitor} {value:.4f})")
        self.number, self.step, self.value = number, step, value


def storage_file(url: Optional[str]) -> Optional[Path]:
    """The file a storage lives in (SQLite database or journal), None for servers and in-memory studies."""
    if url is None:
        return None
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):])
    return None if "://" in url else Path(url).expanduser()


def open_storage(url: Optional[str]):
    """An Optuna storage for ``url`` (None: in memory)."""
    import optuna

    if url is None:
        return None
    if "://" in url:
        # SQLite: several worker processes write one file; wait for its lock instead of failing at once
        engine = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
        return optuna.storages.RDBStorage(url, engine_kwargs=engine)
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    path = str(Path(url).expanduser())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))


def _distribution(override) -> Any:
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    value, key = override.value(), override.get_key_element()
    if isinstance(value, ChoiceSweep):
        return CategoricalDistribution(list(value.list))
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        if not all(float(x).is_integer() for x in (start, stop, step)):
            raise ValueError(f"search space {key}: range() needs integers here; use interval() for floats")
        if int(step) < 1 or int(stop) - int(step) < int(start):
            raise ValueError(f"search space {key}={override.input_line.partition('=')[2]}: holds no value; "
                             f"range(start, stop, step) needs start < stop and step >= 1")
        return IntDistribution(int(start), int(stop) - int(step), step=int(step))  # Python's range: stop excluded
    if isinstance(value, IntervalSweep):
        log = "log" in value.tags
        _check_bounds(override, value.start, value.end, log)
        if "int" in value.tags:
            return IntDistribution(int(value.start), int(value.end), log=log)
        return FloatDistribution(float(value.start), float(value.end), log=log)
    raise ValueError(f"search space {key}={override.input_line}: expected interval(), choice(), range() or a,b,c")


def _check_bounds(override, low: float, high: float, log: bool) -> None:
    """Optuna's own refusals of these come as a traceback from inside the sampler's distribution."""
    key, given = override.get_key_element(), override.input_line.partition("=")[2]
    if low > high:
        raise ValueError(f"search space {key}={given}: the lower bound {low} is above the upper bound {high}; "
                         f"write interval({high}, {low})")
    if log and low <= 0:
        raise ValueError(f"search space {key}={given}: a log scale needs bounds > 0, received lower bound {low}; "
                         f"use a small positive one, e.g. tag(log, interval({high / 1000:g}, {high:g}))")


def search_space(params: Mapping[str, str], arguments: Sequence[str]) -> Tuple[Dict[str, Any], List[str]]:
    """(distributions by key, fixed overrides). Command-line sweeps (``x=1,2``, ``x=interval(..)``) join the
    search space; plain ``key=value`` arguments are fixed and leave it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    space = {o.get_key_element(): _distribution(o)
             for o in parser.parse_overrides([f"{k}={v}" for k, v in (params or {}).items()])}
    fixed = []
    for override in parser.parse_overrides(list(arguments)):
        key = override.get_key_element()
        if override.is_sweep_override():
            space[key] = _distribution(override)
        else:
            space.pop(key, None)
            fixed.append(override.input_line)
    if not space:
        raise ValueError("the sweep has nothing to search: hydra.sweeper.params is empty and no command-line "
                         "key is a sweep (e.g. model.dropout=interval(0,0.5))")
    return space, fixed


def format_value(value: Any) -> str:
    """A sampled value as Hydra override text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)


def trial_overrides(params: Mapping[str, Any], fixed: Sequence[str]) -> List[str]:
    return list(fixed) + [f"{key}={format_value(value)}" for key, value in params.items()]


class Heartbeat:
    """Stamps this worker's running trials every ``interval`` seconds from a daemon thread."""

    def __init__(self, storage, interval: float):
        self.storage, self.interval = storage, interval
        self.trial_ids: set = set()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="optuna-heartbeat", daemon=True)
        self.thread.start()

    def add(self, trial_id: int) -> None:
        self._stamp(trial_id)  # at once: a trial killed before the first beat must still be found stale
        with self.lock:
            self.trial_ids.add(trial_id)

    def remove(self, trial_id: int) -> None:
        with self.lock:
            self.trial_ids.discard(trial_id)

    def close(self) -> None:
        self.stopped.set()

    def _stamp(self, trial_id: int) -> None:
        try:
            self.storage.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())
        except Exception:  # noqa: BLE001 - finished meanwhile, or the database is busy: the next beat retries
            pass

    def _beat(self) -> None:
        while not self.stopped.wait(self.interval):
            with self.lock:
                ids = list(self.trial_ids)
            for trial_id in ids:
                self._stamp(trial_id)


def retry_callback(max_retry: Optional[int]):
    """Optuna's callback that re-queues a failed trial's parameters as a WAITING trial (at most max_retry times)."""
    import warnings

    from optuna.exceptions import ExperimentalWarning
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        return RetryHeartbeatStaleTrialCallback(max_retry=max_retry)


def fail_trial(study, trial_id: int, reason: str, retry) -> bool:
    """Mark a trial FAIL (with ``reason``) and re-queue a copy of it through ``retry``; False if another
    worker finished it first."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    storage = study._storage
    try:
        storage.set_trial_user_attr(trial_id, "interrupted", reason)
        if storage.set_trial_state_values(trial_id, state=TrialState.FAIL) is False:
            return False
    except UpdateFinishedTrialError:
        return False
    retry(study, storage.get_trial(trial_id))
    return True


def fail_stale_trials(study, grace_period: float, retry) -> List[int]:
    """Fail and re-queue RUNNING trials whose worker stopped stamping them; return their numbers."""
    from optuna.trial import TrialState

    now, failed = time.time(), []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        beat = trial.system_attrs.get(HEARTBEAT_ATTR)
        if beat is not None and now - beat > grace_period:
            reason = f"its worker stopped (no heartbeat for {now - beat:.0f} s); re-queued"
            if fail_trial(study, trial._trial_id, reason, retry):
                failed.append(trial.number)
    return failed


class TrialReporter:
    """``fit(validation_callbacks=[...])``: report each validation's monitored value to the Optuna trial;
    when the pruner says so, write ``pruned.json`` into the run dir and raise ``TrialPruned``.
    Rank 0 talks to the study; under DDP every rank follows its decision."""

    def __init__(self, trial, number: int, run_dir: Path, last_step: Optional[int]):
        self.trial, self.number, self.run_dir, self.last_step = trial, number, run_dir, last_step

    def __call__(self, step: int, metrics: Mapping[str, float], monitor: str) -> None:
        value, prune = float(metrics[monitor]), False
        if self.trial is not None and math.isfinite(value):
            self.trial.report(value, step)
            # the run's last validation only reports: pruning a finished trial would save nothing
            prune = (self.last_step is None or step < self.last_step) and self.trial.should_prune()
        prune = distributed.broadcast_object(prune)
        if prune:
            if distributed.is_main():
                record = {"trial": self.number, "step": step, "monitor": monitor, "value": value}
                (self.run_dir / PRUNED_FILE).write_text(json.dumps(record, indent=1) + "\n")
            raise TrialPruned(self.number, step, value, monitor)


def job_trial(sweeper_cfg: Mapping[str, Any], number: int):
    """The Optuna trial this sweep job runs (same process: the sweeper's study; else loaded from storage)."""
    import optuna
    from hydra.utils import instantiate

    study = IN_PROCESS_STUDIES.get(sweeper_cfg["study_name"])
    if study is None:
        if sweeper_cfg.get("storage") is None:
            print("[sweep] storage: null and this job runs in another process than the sweeper: no pruning "
                  "(give hydra.sweeper.storage to prune launched jobs)", flush=True)
            return None
        pruner = instantiate(sweeper_cfg["pruner"]) if sweeper_cfg.get("pruner") else None
        study = optuna.load_study(study_name=sweeper_cfg["study_name"], storage=open_storage(sweeper_cfg["storage"]),
                                  pruner=pruner)
    trial_id = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)
    return optuna.trial.Trial(study, trial_id)


def validation_callbacks_for_job(cfg: Mapping[str, Any], run_dir: Path) -> list:
    """[TrialReporter] inside a job of the Optuna sweeper, else [] (single runs, other sweepers)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    sweeper_cfg = HydraConfig.get().sweeper
    number = sweeper_cfg.get("trial_number") if "trial_number" in sweeper_cfg else None
    if number is None:
        return []
    trial = job_trial(sweeper_cfg, int(number)) if distributed.env_rank() == 0 else None
    return [TrialReporter(trial, int(number), Path(run_dir), cfg["trainer"]["max_steps"])]
