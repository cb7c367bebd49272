"""How one crashing job of a sweep is reported without taking the sweep down.

In multirun mode (`python train.py -m ...`, `hparams_search=...`, submitit launchers) train.py wraps a job in
`report_failures`: if the job raises, the exception is
  1. written to `<job run dir>/failure.json` (error, traceback, overrides) — collect_results marks the run failed;
  2. appended as one JSON line to `<sweep dir>/failures.jsonl` — one place to see every failed job of a sweep;
  3. announced in ONE line (the traceback is in failure.json), and the job returns the WORST value of the monitored metric (+inf when smaller is better, -inf when
     larger is better) instead of raising.
Why return a value at all: Hydra's basic sweeper would re-raise a job's exception once its batch finishes,
failing the whole sweep. The project's Optuna sweeper (hydra_plugins/sru_optuna_sweeper) reads failure.json and
records a FAIL trial instead of the value. Single runs (no -m) still raise, so a bug is never silent there.
At the end of the sweep, ``SweepSummary`` (a Hydra callback, conf/config.yaml) counts failures.jsonl: a sweep
in which any job failed ends with ``N of M jobs failed; see <sweep dir>/failures.jsonl`` and exit status 1.
Ctrl-C / SIGTERM is not caught: the running job saves last.pt and the sweep stops (tasks/engine/run/interrupts.py raises
TrainingInterrupted, a BaseException, which no `except Exception` here sees; docs/failures.md).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from tasks.engine.errors import RunError


def is_multirun() -> bool:
    """True inside a Hydra multirun job (any sweeper or launcher)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def worst_value(mode: str) -> float:
    if mode not in ("min", "max"):
        raise ValueError(f"monitor mode must be 'min' or 'max', received {mode!r}")
    return math.inf if mode == "min" else -math.inf


def record_failure(error: BaseException, run_dir: str | os.PathLike, sweep_dir: str | os.PathLike | None,
                   overrides: list[str]) -> dict:
    """Write failure.json into the job's run dir and append the same record to the sweep's failures.jsonl."""
    record = {
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "unix_time": time.time(),
        "run_dir": str(run_dir),
        "overrides": list(overrides),
        "error": f"{type(error).__name__}: {error}",
        "traceback": "".join(traceback.format_exception(error)),
    }
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    (Path(run_dir) / "failure.json").write_text(json.dumps(record, indent=1) + "\n")
    if sweep_dir is not None:
        Path(sweep_dir).mkdir(parents=True, exist_ok=True)
        # one short write in append mode: lines from parallel jobs do not interleave
        with open(Path(sweep_dir) / "failures.jsonl", "a") as fh:
            fh.write(json.dumps(record) + "\n")
    return record


class JobOutcome:
    """Filled by `report_failures`: `failed` and, when failed, the value the job should return."""

    def __init__(self):
        self.failed = False
        self.value = None


def _mode_of(mode: str | Callable[[], str]) -> str:
    """The monitored metric's mode; "min" when even finding it fails (e.g. the config itself is bad)."""
    try:
        return mode() if callable(mode) else mode
    except Exception:  # noqa: BLE001 - the original error is what gets reported
        return "min"


@contextlib.contextmanager
def report_failures(mode: str | Callable[[], str] = "min"):
    """Inside a multirun job: record any exception and set `outcome.value` to the worst metric value.

    `mode` is "min"/"max" or a function returning it (asked only on failure, e.g. the task's monitor_mode).

        with report_failures(lambda: task_class(cfg.task.name).monitor_mode) as outcome:
            value = fit(...)
        return outcome.value if outcome.failed else value
    """
    outcome = JobOutcome()
    if not is_multirun():
        yield outcome
        return
    try:
        yield outcome
    except Exception as error:  # noqa: BLE001 - reported, not swallowed: see the module docstring
        from hydra.core.hydra_config import HydraConfig

        outcome.failed, outcome.value = True, worst_value(_mode_of(mode))
        if int(os.environ.get("RANK", "0")) != 0:  # a multi-process (SLURM DDP) job: rank 0 reports
            return
        hc = HydraConfig.get()
        record = record_failure(error, hc.runtime.output_dir, hc.sweep.dir, list(hc.overrides.task))
        shown = str(error) if isinstance(error, RunError) else record["error"]  # a RunError names its fix
        print(f"[train] sweep job {hc.job.num} failed: {' '.join(shown.split())} (traceback: "
              f"{Path(hc.runtime.output_dir) / 'failure.json'})", file=sys.stderr, flush=True)


def failed_jobs(sweep_dir: str | os.PathLike, since: float = 0.0) -> int:
    """How many jobs of the sweep in ``sweep_dir`` recorded a failure since ``since`` (a time.time(); an
    earlier sweep into the same explicit hydra.sweep.dir left its own lines in failures.jsonl)."""
    try:
        lines = (Path(sweep_dir) / "failures.jsonl").read_text().splitlines()
    except OSError:
        return 0
    run_dirs = set()
    for line in lines:
        try:
            record = json.loads(line)
            if record.get("unix_time", since) >= since:
                run_dirs.add(record["run_dir"])
        except (ValueError, KeyError, TypeError, AttributeError):
            run_dirs.add(line)  # a torn line still counts as a failure
    return len(run_dirs)


def launched_jobs(sweep_dir: str | os.PathLike, since: float = 0.0) -> int:
    """The job dirs of a sweep started since ``since``: Hydra writes .hydra/ into each (failed or not)."""
    return sum(1 for d in Path(sweep_dir).glob("*/.hydra") if d.is_dir() and d.stat().st_mtime >= since)


class SweepSummary(Callback):
    """After the last job of a ``-m`` sweep (any sweeper, any launcher): a sweep with failed jobs says how
    many in one line and ends with status 1, so scripts and CI do not take it for a success; so does a
    sweep that ran no job at all."""

    def __init__(self):
        self.started = 0.0

    def on_multirun_start(self, config, **kwargs) -> None:
        self.started = time.time() - 1  # file times may lag the clock by a tick

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = str(OmegaConf.select(config, "hydra.sweep.dir"))
        failed = failed_jobs(sweep_dir, self.started)
        if failed:
            total = max(launched_jobs(sweep_dir, self.started), failed)
            print(f"[train] {failed} of {total} jobs failed; see {sweep_dir}/failures.jsonl", file=sys.stderr,
                  flush=True)
            raise SystemExit(1)  # a BaseException: Hydra lets it through without a traceback
        if launched_jobs(sweep_dir, self.started) == 0:  # was silent, status 0: nothing trained, nothing said
            print("[train] the sweep ran no jobs: a swept list or range of the -m overrides is empty (e.g. "
                  "range(16,8)), or the sweeper's n_trials is 0; check them", file=sys.stderr, flush=True)
            raise SystemExit(1)
