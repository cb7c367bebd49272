"""Errors whose message already says what happened and what to do.

``python train.py`` prints a ``RunError`` as one line (``[train] error: ...``) without a traceback and
exits with status 1; any other exception is a bug and keeps its traceback. In a sweep (``-m``) they are
recorded like every other failure (tasks/engine/sweep_failures.py). ``TrainingInterrupted`` is not an error:
it derives from BaseException (like KeyboardInterrupt) so that no ``except Exception`` swallows a
stop requested by SIGTERM/SIGINT, and train.py turns it into exit status ``EXIT_INTERRUPTED``.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Optional

# EX_TEMPFAIL from sysexits.h: "try again later". Distinct from 0 (done), 1 (error) and 128+N (killed).
EXIT_INTERRUPTED = 75


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
                f"resume with: python train.py resume={self.run_dir}")
