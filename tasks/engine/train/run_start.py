"""What ``python train.py`` does before Hydra writes anything into the run directory.

Hydra creates the run dir, writes ``.hydra/{config,hydra,overrides}.yaml`` and opens ``train.log`` before it
calls the task function. A start refused only then (the run dir is in use) had already rewritten those
files of the run that owns the directory, and a ``resume=`` of a finished run re-ran its test and rewrote
its ``results.json`` with an empty record. So ``RunStart``, a Hydra callback (conf/config.yaml,
``hydra.callbacks.run_start``) that ``Hydra.run`` calls before ``run_job``, first
- takes the run lock (tasks/engine/run/lock.py; the runner's own ``RunLock`` then finds it held): a
  refused start changes nothing in the other run's directory;
- on ``resume=``: refuses what the runner would refuse (checkpoint of another run, limits below it, a bad
  ``trainer.*`` value given with it), and
  for a finished run (``results.json`` written, no step left to train) says so in one line and exits 0;
- without ``resume=``: refuses a ``hydra.run.dir`` that already holds a run (a checkpoint, metrics), whose
  ``.hydra/`` record and metrics the new start would overwrite.
Sweeps (``-m``) write each job into a new directory and do not come here.
"""
from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from tasks.engine.run import distributed
from tasks.engine.training.checkpoint import load_checkpoint
from tasks.engine.errors import ResumeError, RunError, override
from tasks.engine.run.interrupts import in_submitit_job
from tasks.engine.run.dirs import never_started
from tasks.engine.run.lock import RunLock, release_all
from tasks.engine.train.runner import check_before_work, config_for_resume, is_resume, resolve_run_dir


def why_finished(trainer: Mapping[str, Any], checkpoint: Mapping[str, Any]) -> Optional[str]:
    """Why resuming this checkpoint with ``trainer`` would train no step (None: it would train on)."""
    progress, step = checkpoint.get("progress") or {}, int(checkpoint["step"])
    epoch = int(progress.get("epoch", 0))
    max_steps, max_epochs = trainer.get("max_steps"), trainer.get("max_epochs")
    if max_steps is not None and step >= max_steps:
        return f"it has trained trainer.max_steps={max_steps} steps"
    if max_epochs is not None and epoch >= max_epochs:
        return f"it has trained trainer.max_epochs={max_epochs} epochs"
    patience, bad = trainer.get("early_stopping_patience"), int(progress.get("bad_evals", 0))
    floor = trainer.get("min_epochs")  # null: no floor
    if patience is not None and bad > patience and (floor is None or epoch >= floor):
        return f"it stopped early ({bad} evaluations without improvement, trainer.early_stopping_patience={patience})"
    return None


def finished_run_note(cfg: DictConfig, run_dir: Path, overrides) -> Optional[str]:
    """The one line for a resume of a finished run, else None (raises the runner's ResumeErrors early)."""
    last = run_dir / "checkpoints" / "last.pt"
    if not last.is_file():
        return None  # resolve_run_dir has refused it already, or resume=true found the run still training
    checkpoint = load_checkpoint(last)
    saved = config_for_resume(cfg, run_dir, overrides, checkpoint, note=lambda _: None)
    check_before_work(saved)  # a bad trainer.* override: refused before Hydra adds .hydra/resume-*/, train.log lines
    reason = why_finished(saved.trainer, checkpoint)
    if reason is None or not (run_dir / "results.json").is_file():
        return None  # steps left, or killed while testing: the resume trains / tests and writes results.json
    return (f"[train] resume: {run_dir} is finished at step {checkpoint['step']} ({reason}); nothing to train, "
            f"nothing changed. Raise trainer.max_steps / trainer.max_epochs to train on, or test it again with python evaluate.py run={run_dir}")


def _resume_of_finished_run(config: DictConfig) -> bool:
    """Rank > 0's view (its hydra.run.dir is '.'): is this a resume that rank 0 ends as finished? Errors are
    rank 0's to report; torchrun then stops this rank."""
    if not is_resume(config.get("resume")):
        return False
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # rank 0 prints which run resume=true picked
            run_dir = Path(resolve_run_dir(config.resume, config.paths.runs_dir, config))
            overrides = list(OmegaConf.select(config, "hydra.overrides.task") or [])
            return finished_run_note(config, run_dir, overrides) is not None
    except RunError:
        return False


class RunStart(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if distributed.env_rank() != 0:  # ranks > 0 write nothing (distributed.hydra_overrides_for_rank)
            if _resume_of_finished_run(config):
                raise SystemExit(0)  # as rank 0 does: else this rank would wait for it in the process group
            return
        run_dir = Path(str(OmegaConf.select(config, "hydra.run.dir")))
        note = None
        try:
            RunLock(run_dir).hold_until_exit()
            if is_resume(config.get("resume")):
                overrides = list(OmegaConf.select(config, "hydra.overrides.task") or [])
                note = finished_run_note(config, run_dir, overrides)
            elif run_dir.is_dir() and not never_started(run_dir) and not in_submitit_job():  # (a requeue resumes)
                raise ResumeError(f"run directory {run_dir} already holds a run (checkpoints or metrics); a new "
                                  f"start there would overwrite its .hydra/ record and metrics. Continue it with "
                                  f"{override('resume', run_dir)}, or pick another hydra.run.dir")
        except RunError as err:
            release_all()
            print(f"[train] error: {' '.join(str(err).split())}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None  # a BaseException: Hydra lets it through without a traceback
        if note is not None:
            release_all()
            print(note, flush=True)
            raise SystemExit(0)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        release_all()
