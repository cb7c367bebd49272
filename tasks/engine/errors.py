"""Errors whose message already says what happened and what to do.

``python train.py`` prints a ``RunError`` as one line (``[train] error: ...``) without a traceback and
exits with status 1; any other exception is a bug and keeps its traceback. In a sweep (``-m``) they are
recorded like every other failure (tasks/engine/sweeps/failures.py). ``TrainingInterrupted`` is not an error:
it derives from BaseException (like KeyboardInterrupt) so that no ``except Exception`` swallows a
stop requested by SIGTERM/SIGINT, and train.py turns it into exit status ``EXIT_INTERRUPTED``.
"""
from __future__ import annotations

import re
import shlex
import signal
from pathlib import Path
from typing import Any, Optional

# EX_TEMPFAIL from sysexits.h: "try again later". Distinct from 0 (done), 1 (error) and 128+N (killed).
EXIT_INTERRUPTED = 75


# Characters a Hydra override value may hold unquoted (its grammar's primitive) and a shell passes as they are.
_PLAIN = re.compile(r"[A-Za-z0-9_/.:@%+-]+")


def override(key: str, value: Any) -> str:
    """``key=value`` as one token to paste into a shell, and that Hydra parses back to ``value``:
    ``resume=runs/x``, ``"resume='/data/my runs/x'"`` (Hydra needs the quotes; the shell keeps them)."""
    text = str(value)
    if _PLAIN.fullmatch(text):
        return f"{key}={text}"
    # Hydra's quoted string: backslashes before a quote (or the end) doubled, quotes and ${ escaped
    escaped = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text).replace("'", "\\'").replace("${", "\\${")
    hydra = f"'{escaped}'"
    token = f"{key}={hydra}"
    if not re.search(r'["$`\\!]', token):
        return f'"{token}"'  # readable: double quotes around Hydra's single-quoted value
    return shlex.quote(token)


def train_command(*overrides: str) -> str:
    """``python train.py <overrides>`` (each made by ``override``), ready to paste."""
    return " ".join(("python train.py",) + overrides)


def resume_command(run_dir: Any, *more: str) -> str:
    return train_command(override("resume", run_dir), *more)


def not_a_file(path: Path, what: str, fix: str) -> OSError:
    """The error for a data path that is not a file: ``<what> not found: <path>. <fix>``, or, for a folder,
    ``<what> <path> is a directory, not a file. <fix>`` (reported "not found", a folder sent users looking
    for a typo that was not there)."""
    if Path(path).is_dir():
        return IsADirectoryError(f"{what} {path} is a directory, not a file. {fix}")
    return FileNotFoundError(f"{what} not found: {path}. {fix}")


def shell_path(path: Any) -> str:
    return shlex.quote(str(path))


class RunError(Exception):
    """An error the user fixes by following its message."""


class ConfigError(RunError, ValueError):
    """A config key has a wrong type or value (raised before any data is loaded)."""


class DataError(RunError, ValueError):
    """A data file or split cannot be used (empty, too short ...): the message names file, split and key."""


class ResumeError(RunError, ValueError):
    """resume=... cannot continue the asked run (no checkpoint, another model, ...)."""


class RunLockedError(RunError):
    """Another live process owns the run directory."""


class NonFiniteError(RunError, FloatingPointError):
    """Training diverged: nothing non-finite was saved."""


class CheckpointWriteError(RunError, OSError):
    """A checkpoint could not be written (full disk ...); the previous checkpoints are intact."""


class MissingPackageError(RunError, ImportError):
    """An optional package the chosen config needs is not installed (the message has the pip line)."""


class CheckpointReadError(ResumeError, RuntimeError):
    """A checkpoint file is missing, truncated or not a trainer checkpoint."""


class TrainingInterrupted(BaseException):
    """SIGTERM / SIGINT / SIGUSR2 stopped the run; ``checkpoint`` holds the state at ``step`` (None: nothing saved)."""

    def __init__(self, signum: int, step: Optional[int] = None, checkpoint: Optional[Path] = None,
                 run_dir: Optional[Path] = None):
        self.signum, self.step, self.checkpoint, self.run_dir = signum, step, checkpoint, run_dir
        super().__init__(self.message())

    @property
    def signal_name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    def message(self) -> str:
        if self.checkpoint is None:
            return f"stopped by {self.signal_name} outside the training loop: no checkpoint written now"
        return (f"stopped by {self.signal_name} at step {self.step}: checkpoint {self.checkpoint}; "
                f"resume with: {resume_command(self.run_dir)}")
