"""SIGTERM / SIGINT (and submitit's SIGUSR2) turned into a clean stop at an optimizer-step boundary.

    with StopSignals() as stop:           # the runner, around the whole run
        ...                               # setup: a signal raises TrainingInterrupted at once (nothing to save)
        with stop.deferred():             # the training loop
            ...; if stop.requested(): save last.pt; raise TrainingInterrupted(...)

Why: SLURM preemption sends SIGTERM (then SIGKILL after a grace period) and Ctrl-C sends SIGINT; by
default both kill the run and lose every step since the last evaluation. While deferred, the first signal
only sets a flag that the trainer reads after each optimizer step (under DDP every rank all-reduces
it, so all ranks stop at the same step); a second signal exits at once with status 128+signal.

Inside a submitit job (hydra/launcher=slurm|local) SIGUSR2 is submitit's "you are about to be
preempted / time out" signal: it is handled the same way, and after the checkpoint is written the
runner hands the signal to submitit's own handler, which requeues the job (its checkpointing
protocol); the requeued job resumes from last.pt (tasks/engine/train/runner.py).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Set

from tasks.engine.errors import TrainingInterrupted

# Temporary files being written right now (checkpoints' <name>.tmp): a second signal exits with os._exit,
# which runs no `finally`, so the handler removes them itself; a partial .tmp must never be left behind.
_WRITING: Set[Path] = set()


@contextlib.contextmanager
def writing(tmp: Path) -> Iterator[Path]:
    """Around the write of a temporary file: removed on any exit, even the second signal's os._exit."""
    tmp = Path(tmp)
    _WRITING.add(tmp)
    try:
        yield tmp
    finally:
        _WRITING.discard(tmp)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` all at once (metrics, predictions, sweep tables): a reader or a crash
    sees the old file or the new one, never half of one. The temporary file is named per process (two
    writers of one file never share it) and removed on any exit."""
    path = Path(path)
    with writing(path.with_name(f".{path.name}.{os.getpid()}.tmp")) as tmp:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def remove_partial_files() -> None:
    for tmp in list(_WRITING):
        with contextlib.suppress(OSError):
            tmp.unlink()


# What a command that writes only at its end says when a signal stops it before then
NOTHING_WRITTEN = {"evaluate": "no metrics written", "predict": "no results written", "train": "nothing saved"}


def stop_on_signals(command: str) -> None:
    """SIGINT / SIGTERM from the first instruction of ``evaluate.py``, ``predict.py`` and ``train.py``
    (docs/inference.md#signals).

    Python's own Ctrl-C handling raises ``KeyboardInterrupt`` wherever the main thread is: during the seconds
    of heavy imports (torch, Hydra) that gave a 20-line traceback, was sometimes lost, and inside a half-done
    extension import ended in ``ImportError: cannot load module more than once per process``. So the
    commands install this handler before importing anything heavy (this module imports only the standard
    library and the engine's errors): a signal ends the command with one line, status 128+signal, and
    nothing written (a temporary file being written is removed). Inside the run context ``StopSignals``
    takes over (same line, same status) and hands back to this one on leaving it."""
    def handle(signum: int, frame: Any = None) -> None:
        del frame
        remove_partial_files()
        try:
            sys.stderr.write(f"[{command}] stopped by {signal.Signals(signum).name}; {NOTHING_WRITTEN[command]}\n")
            sys.stderr.flush()
        finally:
            os._exit(128 + signum)  # no cleanup code runs that could write or print a traceback

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, handle)


def in_submitit_job() -> bool:
    return os.environ.get("SUBMITIT_EXECUTOR") is not None


def handled_signals():
    sigs = [signal.SIGTERM, signal.SIGINT]
    if in_submitit_job() and hasattr(signal, "SIGUSR2"):
        sigs.append(signal.SIGUSR2)
    return sigs


def say_from_handler(text: str) -> None:
    """One line to standard error from inside a signal handler: written to file descriptor 2 directly.
    ``print`` could re-enter the buffered writer that the interrupted code is in the middle of (a log line
    being copied to train.log, tasks/engine/run/console.py), which raises ``RuntimeError: reentrant call``
    in the training loop instead of stopping it cleanly. Not copied to train.log for the same reason."""
    try:
        sys.stderr.flush()  # what was printed before comes first, where the stream allows it now
    except (RuntimeError, ValueError, OSError):
        pass
    try:
        os.write(2, (text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


class StopSignals:
    """Owns the process's SIGTERM/SIGINT(/SIGUSR2) handlers between ``__enter__`` and ``__exit__``."""

    def __init__(self):
        self.signum: Optional[int] = None
        self.previous: Dict[int, Any] = {}
        self._deferred = False
        self.installed = False

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():  # signals only reach the main thread
            for s in handled_signals():
                self.previous[s] = signal.signal(s, self.handle)
            self.installed = True
        return self

    def __exit__(self, *exc) -> None:
        if self.installed:
            for s, handler in self.previous.items():  # kept: chain_to_previous may still need them
                signal.signal(s, handler)
        self.installed = False

    @contextlib.contextmanager
    def deferred(self):
        """Inside: a signal is a request that the trainer honours after the current optimizer step."""
        self._deferred = True
        try:
            if self.signum is not None:  # arrived just before the loop started
                raise TrainingInterrupted(self.signum)
            yield self
        finally:
            self._deferred = False

    def handle(self, signum: int, frame: Any = None) -> None:
        del frame
        name = signal.Signals(signum).name
        if self.signum is not None:
            remove_partial_files()
            say_from_handler(f"[trainer] second signal ({name}): exiting now without saving")
            os._exit(128 + signum)
        self.signum = signum
        if not self._deferred:
            raise TrainingInterrupted(signum)
        say_from_handler(f"[trainer] {name}: stopping after the current optimizer step and saving last.pt "
                         f"(send it again to exit at once)")

    def requested(self) -> bool:
        return self.signum is not None

    def chain_to_previous(self, signum: int) -> None:
        """Hand ``signum`` to the handler that was installed before ours (submitit's requeue handler)."""
        previous = self.previous.get(signum)
        if callable(previous):
            previous(signum, None)
