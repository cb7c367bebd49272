"""Run one configuration end to end: the pipeline behind ``python train.py`` (and ``sru-train``).

    cfg = compose(["task=<name>", "model=lstm"])  # the config `python train.py task=<name> model=lstm` runs
    summary = run(cfg, run_dir, overrides)        # check -> seed -> task.setup -> fit -> test -> results.json

Importing this module registers the OmegaConf resolvers the configs use (``run_dir``, ``run_id``,
``hydra_subdir``), so scripts and tests compose configs with ``compose()`` instead of importing train.py.
``CONF_DIR`` is the config tree: the checkout's ``conf/`` (editable installs, a clone), else the copy a
regular ``pip install .`` puts under ``<prefix>/share/sru-experiments/conf``, or ``$SRU_CONF_DIR``.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from tasks.engine.run import distributed
from tasks.engine.training.checkpoint import load_checkpoint
from tasks.engine.config.checks import check_run_config
from tasks.engine.config.command_line import check_top_level_keys
from tasks.engine.config.tree import CONF_DIR, compose
from tasks.engine.run.console import tee_console
from tasks.engine.errors import (EXIT_INTERRUPTED, ConfigError, DataError, ResumeError, RunError, TrainingInterrupted,
                                 override)
from tasks.engine.inference.loader import export_run_model
from tasks.engine.inference.overrides import check_read_by_source
from tasks.engine.run.interrupts import in_submitit_job
from tasks.engine.base import build_task, task_class
from tasks.engine.run_metrics import json_safe, shown
from tasks.engine.run.dirs import RunDirError, check_writable, never_started, remove_if_unused
from tasks.engine.run.context import RunContext, open_run
from tasks.engine.train.start_signals import FRESH_RUN_DIRS, run_app, stopped_before_training
from tasks.engine.run.lock import LOCK_NAME, read_lock
from tasks.engine.config.saved import fill_added_keys, group_choices
from tasks.engine.sweeps.failures import report_failures
from tasks.engine.sweeps.study import TrialPruned, validation_callbacks_for_job
from tasks.engine.training.trainer import evaluate_best, fit

# One id per process: run folders started in the same second by different processes never collide.
RUN_ID = f"{os.getpid()}-{secrets.token_hex(2)}"
RUN_STAMP = time.strftime("%Y-%m-%d/%H-%M-%S")


def is_resume(resume: Any) -> bool:
    return resume not in (None, False, "null", "false", "")


def _run_name_of(run_dir: Path) -> Optional[str]:
    """The run_name (default <task>-<model>) a run directory's .hydra/config.yaml resolves to."""
    try:
        return str(OmegaConf.select(OmegaConf.load(run_dir / ".hydra" / "config.yaml"), "run_name"))
    except Exception:  # noqa: BLE001 - unreadable or foreign: not a candidate
        return None


def _start_key(run_dir: Path):
    # run dirs are <date>/<HH-MM-SS>_<pid>-<random>: the names give the start time to the second
    made = run_dir / ".hydra" / "config.yaml"
    return run_dir.parent.name, run_dir.name[:8], (made if made.exists() else run_dir).stat().st_mtime


@functools.lru_cache(maxsize=None)  # Hydra resolves hydra.run.dir several times: decide (and print) once
def find_latest_run(runs_dir: str, run_name: Optional[str] = None) -> str:
    """The newest run under ``runs_dir`` with ``run_name``; refuse it when it has no checkpoint yet."""
    root = Path(runs_dir)
    runs = [d for d in root.glob("*/*") if (d / ".hydra" / "config.yaml").is_file()
            or (d / "checkpoints" / "last.pt").is_file()]
    if run_name is not None:
        runs = [d for d in runs if _run_name_of(d) == run_name]
    runs.sort(key=_start_key)
    named = f"{run_name} " if run_name else ""
    unused = [d for d in runs if never_started(d) and not read_lock(d / LOCK_NAME)]
    if unused:  # starts killed before their first step (kill -9 while loading data): nothing to continue
        print(f"[train] resume=true: passing over {len(unused)} {named}run dir(s) that never trained "
              f"(no checkpoint, no metrics): {', '.join(str(d) for d in unused[-3:])}", flush=True)
        runs = [d for d in runs if d not in unused]
    if not runs:
        raise ResumeError(f"resume=true: expected a {named}run with checkpoints/last.pt under {root.resolve()}, "
                          f"found none. Pass resume=<run dir> or start a new run without resume.")
    newest = runs[-1]
    if not (newest / "checkpoints" / "last.pt").is_file():
        owner = read_lock(newest / LOCK_NAME)
        state = (f"it is still running (pid {owner.get('pid')} on {owner.get('host')})" if owner else
                 "it stopped before its first checkpoint")
        older = [d for d in runs[:-1] if (d / "checkpoints" / "last.pt").is_file()]
        other = (f"; the newest one that has a checkpoint is {older[-1]}: pass {override('resume', older[-1])} "
                 f"to continue it" if older else "")
        raise ResumeError(f"resume=true: the newest {named}run {newest} has no checkpoints/last.pt yet ({state}); "
                          f"not jumping to an older run{other}, or start a new run without resume")
    print(f"[train] resume=true: continuing {newest}, the newest of {len(runs)} {named}run(s) under {root} "
          f"(newest by start time; only runs with run_name={run_name} count)", flush=True)
    return str(newest)


def resolve_run_dir(resume: Any, runs_dir: str, _root_: Any = None) -> str:
    if not is_resume(resume):
        return f"{runs_dir}/{RUN_STAMP}_{RUN_ID}"
    if resume is True or str(resume).lower() == "true":
        run_name = OmegaConf.select(_root_, "run_name") if _root_ is not None else None
        return find_latest_run(runs_dir, None if run_name is None else str(run_name))
    if not (Path(str(resume)) / "checkpoints" / "last.pt").is_file():
        raise ResumeError(f"resume={resume}: expected a run directory containing checkpoints/last.pt, "
                          f"found none at {Path(str(resume)).resolve()}")
    return str(resume)


OmegaConf.register_new_resolver("run_id", lambda: RUN_ID, replace=True)


@functools.lru_cache(maxsize=None)  # resolved several times per start: probe once
def _checked_writable(run_dir: str, resume: bool) -> None:
    check_writable(Path(run_dir), resume)


def _run_dir_resolver(resume: Any, runs_dir: str, _root_: Any = None) -> str:
    """``${run_dir:...}`` for Hydra: a ResumeError becomes one line and exit 1, not a resolver traceback;
    so does a run dir Hydra could not write into (read-only, full disk), checked before Hydra tries."""
    try:
        run_dir = resolve_run_dir(resume, runs_dir, _root_)
        if not is_resume(resume):
            FRESH_RUN_DIRS.add(run_dir)
        if str(OmegaConf.select(_root_, "hydra.mode", default="")).split(".")[-1] == "RUN":  # not a sweep
            _checked_writable(run_dir, is_resume(resume))
        return run_dir
    except (ResumeError, RunDirError) as err:
        print(f"[train] error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None  # a BaseException: OmegaConf and Hydra let it through unwrapped


OmegaConf.register_new_resolver("run_dir", _run_dir_resolver, replace=True)
# A resumed run keeps the original run's .hydra/ and records its own invocation beside it.
OmegaConf.register_new_resolver(
    "hydra_subdir", lambda resume: f".hydra/resume-{RUN_ID}" if is_resume(resume) else ".hydra", replace=True)


def _differences(a: Any, b: Any, prefix: str) -> list:
    """Keys whose values differ between two plain config trees, as 'key (checkpoint X, run Y)'."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(key, "<missing>"), b.get(key, "<missing>"), f"{prefix}.{key}")
        return out
    return [] if a == b else [f"{prefix} (checkpoint {a!r}, run {b!r})"]


def check_checkpoint_matches_run(saved: Dict[str, Any], run_dir: Path) -> None:
    """The checkpoint's model/task config must be the run's own (.hydra/config.yaml), key for key."""
    hydra_config = run_dir / ".hydra" / "config.yaml"
    if not hydra_config.is_file():
        return  # a run started by a script (no Hydra): the checkpoint's config is the only record
    try:
        own = OmegaConf.to_container(OmegaConf.load(hydra_config), resolve=True)
    except Exception:  # noqa: BLE001 - an unresolvable record cannot be compared; the shape check remains
        return
    diffs = [d for group in ("model", "task") if group in own
             for d in _differences(saved.get(group), own[group], group)]
    if diffs:
        raise ResumeError(f"checkpoint {run_dir / 'checkpoints' / 'last.pt'} does not belong to this run: its "
                          f"config differs from {hydra_config} at {'; '.join(diffs[:8])}. Put this run's own "
                          f"last.pt back (or best.pt), or start a new run with resume=null")


def config_for_resume(cfg: DictConfig, run_dir: Path, overrides: Sequence[str],
                      checkpoint: Optional[Dict[str, Any]] = None, note=print) -> DictConfig:
    """The saved run's config, with trainer.* / logger.* overrides from this command line applied.
    ``checkpoint``: last.pt already loaded; ``note``: where the notes on ignored overrides go."""
    checkpoint = checkpoint or load_checkpoint(run_dir / "checkpoints" / "last.pt")
    saved_dict = checkpoint["config"]
    check_checkpoint_matches_run(saved_dict, run_dir)
    saved = OmegaConf.create(saved_dict)
    try:  # a run saved before conf/ gained a key gets that key (tasks/engine/config/saved.py)
        added = fill_added_keys(saved, compose(group_choices(saved)))
    except Exception:  # noqa: BLE001 - a config tree without these groups: the schema check names what is missing
        added = []
    if added:
        note(f"[train] resume: the saved config predates {len(added)} key(s) of conf/, taken from there: "
             f"{', '.join(added[:6])}{' ...' if len(added) > 6 else ''}")
    for given in overrides:
        key = given.split("=", 1)[0].lstrip("+~")
        if key.split(".")[0] in ("trainer", "logger"):
            OmegaConf.update(saved, key, OmegaConf.select(cfg, key), merge=False)
        elif key != "resume":
            note(f"[train] resume: ignoring override {given!r}; the run continues with its saved config "
                 f"(only trainer.* and logger.* may change)")
    saved.resume = cfg.resume
    check_limits_not_below(saved.trainer, checkpoint, run_dir)
    return saved


def check_limits_not_below(trainer: DictConfig, checkpoint: Dict[str, Any], run_dir: Path) -> None:
    """A resume whose max_steps / max_epochs is below what the checkpoint already did cannot be honoured."""
    progress = checkpoint.get("progress") or {}
    step, epoch = int(checkpoint["step"]), int(progress.get("epoch", 0))
    for key, done, unit in (("max_steps", step, "step"), ("max_epochs", epoch, "epoch")):
        limit = trainer.get(key)
        if isinstance(limit, int) and limit < done:
            raise ResumeError(f"resume: trainer.{key}={limit} is below the checkpoint's {unit} {done} "
                              f"({run_dir / 'checkpoints' / 'last.pt'}); a run cannot be shortened after the fact. "
                              f"Pass trainer.{key}={done} or more (or null), or score it without training: "
                              f"python evaluate.py run={run_dir}")


@contextlib.contextmanager
def data_errors_as_one_line():
    """A data loader's OSError / ValueError (missing, unreadable or malformed file; a missing tool) names the
    file and the fix in its message: show it as one ``[train] error:`` line (HYDRA_FULL_ERROR=1: traceback)."""
    try:
        yield
    except RunError:
        raise
    except (OSError, ValueError) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        raise DataError(str(err)) from err


def check_before_work(cfg: DictConfig):
    """Every config check that needs no data: trainer/seed/task keys, then the task's own (model keys)."""
    try:
        check_run_config(cfg)
        task = build_task(cfg)
        task.check_config()
    except ConfigError:
        raise
    except ValueError as err:  # the task's and encoders' checks: same one-line treatment
        raise ConfigError(str(err)) from None
    return task


def check_command_line(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """What the command line gave that the run would silently not use: a new top-level key, a data file of
    another source than the one chosen (as evaluate.py refuses it: inference/overrides.py)."""
    check_top_level_keys(cfg, overrides, CONF_DIR)
    if OmegaConf.select(cfg, "task.data.source", default=None) is None:
        return  # picked later from a data preset (a task may have them): the loader says which files it reads
    for item in overrides:
        if item.partition("=")[2].strip() not in ("", "null"):
            check_read_by_source(item, cfg, "trained on")


def run(cfg: DictConfig, run_dir: Path, overrides: Sequence[str] = (),
        validation_callbacks: Sequence = ()) -> Dict[str, Any]:
    """Train + test one configuration in ``run_dir``; return the summary also written to results.json.

    ``overrides`` are the command line's key=value strings (used to pick what may change on resume).
    ``validation_callbacks``: called as ``callback(step, metrics, monitor)`` after each validation (an Optuna
    trial's reporter, tasks/engine/sweeps/study.py); one may raise to stop the run.
    The walk is straight down: the config this run uses (a resume: the saved one plus trainer.* /
    logger.* overrides), checked once and the task built once, before any process group, lock or data;
    then the run context (signals, process group, run dir and its lock, seed, threads, device: once,
    tasks/engine/run/context.py), the task's data, training, test.
    """
    resume = is_resume(cfg.resume)
    if resume:  # found from the file system, so every rank finds it (ranks > 0 have no Hydra run dir)
        cfg = config_for_resume(cfg, Path(resolve_run_dir(cfg.resume, cfg.paths.runs_dir, cfg)), overrides)
    else:
        check_command_line(cfg, overrides)
    task = check_before_work(cfg)
    with open_run(cfg, run_dir) as ctx:
        try:
            return _run_in_context(cfg, task, ctx, resume, validation_callbacks)
        except TrainingInterrupted as stop:
            stop.previous_handler = ctx.stop_signals.previous.get(stop.signum)  # submitit's requeue handler
            if stop.checkpoint is not None:
                _export_model(ctx.run_dir, task)  # a stopped run is usable too (its best weights so far)
            raise


def _run_in_context(cfg: DictConfig, task, ctx: RunContext, resume: bool, validation_callbacks: Sequence = ()):
    run_dir = ctx.run_dir
    config = OmegaConf.to_container(cfg, resolve=True)
    print(f"[train] run dir: {run_dir}", flush=True)

    with data_errors_as_one_line():
        task.setup()
    result = fit(cfg, task, ctx, resume=resume, config_to_save=config, validation_callbacks=validation_callbacks)

    _export_model(run_dir, task)
    summary: Dict[str, Any] = {"monitor": result.monitor, "best_valid": result.best_metric, "steps": result.steps,
                               "final_valid": result.final_valid, "train_items_per_s": result.items_per_second,
                               "train_items_per_cpu_s": result.items_per_cpu_second}
    print(f"[train] best valid {result.monitor}: {shown(result.best_metric)}", flush=True)
    if cfg.test_after_training:
        test = evaluate_best(task, result, ctx, "test")
        summary["test"] = test
        print(f"[train] test {result.monitor} (best checkpoint): {test[result.monitor]:.4f}", flush=True)
    if distributed.is_main():
        (run_dir / "results.json").write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False))
    return summary


def _export_model(run_dir: Path, task) -> None:
    """model.pt beside the checkpoints: what evaluate.py / predict.py need, in one file (rank 0 writes)."""
    if distributed.is_main():
        path = export_run_model(run_dir, task)
        if path is not None:
            print(f"[train] model file: {path} (python predict.py run={path}; docs/inference.md)", flush=True)


def resume_requeued_job(cfg: DictConfig, run_dir: Path) -> None:
    """A submitit job requeued after preemption reruns with its original overrides (resume=null) in its
    original run dir: continue from the last.pt its previous attempt saved there. Sweep run dirs are new
    per sweep, so a last.pt there can only come from an earlier attempt of this very job."""
    if in_submitit_job() and not is_resume(cfg.resume) and (run_dir / "checkpoints" / "last.pt").is_file():
        print(f"[train] requeued job: resuming {run_dir} from its checkpoints/last.pt", flush=True)
        cfg.resume = str(run_dir)


def hydra_main(cfg: DictConfig) -> Optional[float]:
    """The body of the Hydra entry point: run one job; in a sweep, record a crash and return the worst value.

    Exit statuses: 0 done; 1 an error (a RunError is printed as one line, without traceback);
    75 (EXIT_INTERRUPTED) stopped by SIGTERM/SIGINT with last.pt saved; 128+N a second signal N.
    """
    from hydra.core.hydra_config import HydraConfig


    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    main_rank = distributed.env_rank() == 0
    # a new single run that ends before training started leaves no run dir (resume=true would stop at it)
    fresh = main_rank and not is_resume(cfg.resume) and str(hydra_cfg.mode).split(".")[-1] == "RUN"
    try:
        with (tee_console(run_dir / f"{hydra_cfg.job.name}.log") if main_rank  # train.log holds the console
              else contextlib.nullcontext()):
            return _hydra_job(cfg, run_dir, hydra_cfg.overrides.task)
    except (SystemExit, KeyboardInterrupt):
        if fresh:
            remove_if_unused(run_dir)
        raise


def _hydra_job(cfg: DictConfig, run_dir: Path, overrides: Sequence[str]) -> Optional[float]:
    try:
        with report_failures(lambda: task_class(cfg.task.name).monitor_mode) as outcome:
            try:
                resume_requeued_job(cfg, run_dir)
                with contextlib.ExitStack() as stack:
                    if distributed.env_rank() != 0:  # ranks > 0 print nothing (their errors still reach stderr)
                        stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
                    callbacks = validation_callbacks_for_job(cfg, run_dir)  # an Optuna sweep's trial reporter
                    summary = run(cfg, run_dir, overrides, callbacks)
            finally:
                distributed.cleanup()
    except RunError as err:  # (in a sweep, report_failures has recorded it instead)
        print(f"[train] error: {' '.join(str(err).split())}", file=sys.stderr, flush=True)  # one line, always
        raise SystemExit(1) from None
    except TrainingInterrupted as stop:
        if distributed.env_rank() == 0:
            print(f"[train] {stop}", file=sys.stderr, flush=True)
        previous = getattr(stop, "previous_handler", None)
        if stop.checkpoint is not None and in_submitit_job() and callable(previous) and stop.signum != signal.SIGINT:
            previous(stop.signum, None)  # submitit: pickle the job for requeue, requeue it, exit
        raise SystemExit(EXIT_INTERRUPTED if stop.checkpoint is not None else 128 + stop.signum) from None
    except TrialPruned as pruned:  # the run dir has pruned.json; the sweeper counts the trial as pruned
        print(f"[train] {pruned}", flush=True)
        return pruned.value
    except KeyboardInterrupt as stop:  # a signal before the run context's handlers took over (run_app's)
        raise stopped_before_training(stop) from None
    return outcome.value if outcome.failed else summary["best_valid"]


# Hydra's flags that take no value: argparse reads them only before the overrides (``train.py model=lstm -m
# seed=1,2`` was a 5-line usage block and "unrecognized arguments"), so they are moved to the front
VALUELESS_FLAGS = ("-m", "--multirun")


def flags_first(args: list) -> list:
    return [a for a in args if a in VALUELESS_FLAGS] + [a for a in args if a not in VALUELESS_FLAGS]


def prepare_argv() -> None:
    """torchrun starts N copies of the entry point: ranks > 0 must not create Hydra run dirs or logs.
    A user's --config-dir is checked first (tasks/engine/config/user_dir.py), then the command line composed
    (config/hydra_errors.py): one line instead of Hydra's errors."""
    from tasks.engine.config.hydra_errors import check_composes
    from tasks.engine.config.user_dir import check_config_dirs

    sys.argv[1:] = flags_first(sys.argv[1:])
    try:
        check_config_dirs(sys.argv[1:])
        check_composes(sys.argv[1:])  # Hydra's missing config file / missing key: one line, not its block
    except ConfigError as err:
        print(f"[train] error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    sys.argv += distributed.hydra_overrides_for_rank(argv=sys.argv)


def cli() -> None:
    """The body of ``sru-train`` (tasks/engine/train/command.py), the same entry point as ``python train.py``."""
    import hydra

    prepare_argv()
    run_app(hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(hydra_main))
