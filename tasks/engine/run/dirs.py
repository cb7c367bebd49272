"""Run directories at the edges of a run: writable before Hydra writes into one, gone after a refused start.

Hydra creates the run directory (and writes ``.hydra/`` and ``train.log`` there) before ``hydra_main``
runs, so these checks sit in the ``${run_dir:...}`` resolver that names the directory:
- ``check_writable``: a read-only ``paths.root``, a read-only run dir to resume, or a full disk ends in
  one line naming the path, instead of Hydra's ``OSError [Errno 30]`` / ``[Errno 28]`` traceback or
  ``ValueError: Unable to configure handler 'file'``.
- ``remove_if_unused``: a start refused (bad config value, bad data file) or stopped before training
  began leaves nothing behind, so ``resume=true`` afterwards finds the run that really has a checkpoint.
- ``never_started``: what ``resume=true`` passes over (a start killed before its first step, e.g. by
  ``kill -9`` during data loading, which no handler can clean up).
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from tasks.engine.errors import RunError

PROBE_BYTES = 64 * 1024  # about what Hydra writes first (.hydra/*.yaml); a full disk refuses it
RECORDS = (".hydra", "train.log", "run.lock", "metrics.jsonl")  # what a run writes before its first step


class RunDirError(RunError, OSError):
    """The run directory cannot be created or written."""


def _free(path: Path) -> str:
    for candidate in (path, *path.parents):
        try:
            return f"{shutil.disk_usage(candidate).free / 2**20:,.0f} MiB free"
        except OSError:
            continue
    return "free space unknown"


def check_writable(run_dir: Path, resume: bool) -> None:
    """Create ``run_dir`` and write (then remove) a small file in it; raise one RunDirError if that fails."""
    run_dir = Path(run_dir)
    probe = run_dir / f".write-test-{os.getpid()}"
    created = next((d for d in reversed((run_dir, *run_dir.parents)) if not d.exists()), None)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as f:
            f.write(b"\0" * PROBE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        where = err.filename or run_dir
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            what = f"no space left on the device of {where} ({_free(Path(where))})"
            fix = "free space there, or put the runs on a larger disk with paths.root=<dir>"
        else:
            what = f"cannot write to {where} ({err.strerror or err})"
            fix = ("copy the run directory to a writable place and resume=<the copy>" if resume else
                   "pick a writable folder with paths.root=<dir> (or paths.runs_dir=<dir>)")
        if created is not None:  # leave no empty folders behind on the full / read-only disk
            shutil.rmtree(created, ignore_errors=True)
        raise RunDirError(f"run directory {run_dir}: {what}. To continue: {fix}") from None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass


def never_started(run_dir: Path) -> bool:
    """True for a run dir holding only what a run writes before its first training step."""
    run_dir = Path(run_dir)
    if (run_dir / "checkpoints").exists():
        return False
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file() and metrics.stat().st_size > 0:
        return False
    return all(child.name in RECORDS or child.name.startswith(".write-test-") for child in run_dir.iterdir())


def remove_if_unused(run_dir: Path) -> bool:
    """Delete a run dir that holds no result (see ``never_started``), and its date folder if now empty."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir() or not never_started(run_dir):
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        run_dir.parent.rmdir()  # the <date> folder, only when no other run is in it
    except OSError:
        pass
    return not run_dir.exists()
