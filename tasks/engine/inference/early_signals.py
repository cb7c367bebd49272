"""SIGINT / SIGTERM from the first instruction of ``evaluate.py``, ``predict.py`` and ``train.py``
(docs/inference.md#signals).

Python's own Ctrl-C handling raises ``KeyboardInterrupt`` wherever the main thread is: during the
seconds of heavy imports (torch, Hydra) that gave a 20-line traceback, was sometimes lost, and inside a
half-done extension import ended in ``ImportError: cannot load module more than once per process``. So
the entry points install this handler before importing anything heavy (this module imports only the
standard library and ``interrupts``): a signal ends the command with one line, status 128+signal, and
nothing written (a temporary file being written is removed). Inside the run context the trainer's
``StopSignals`` takes over (same line, same status) and hands back to this one on leaving it.
"""
from __future__ import annotations

import os
import signal
import sys

from tasks.engine.run.interrupts import remove_partial_files

NOTHING_WRITTEN = {"evaluate": "no metrics written", "predict": "no results written", "train": "nothing saved"}


def stop_on_signals(command: str) -> None:
    def handle(signum: int, frame=None) -> None:
        del frame
        remove_partial_files()
        try:
            sys.stderr.write(f"[{command}] stopped by {signal.Signals(signum).name}; {NOTHING_WRITTEN[command]}\n")
            sys.stderr.flush()
        finally:
            os._exit(128 + signum)  # no cleanup code runs that could write or print a traceback

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, handle)


def evaluate() -> None:
    """``sru-evaluate`` / ``python evaluate.py``."""
    stop_on_signals("evaluate")
    from tasks.engine.inference.evaluate_cmd import main
    main()


def predict() -> None:
    """``sru-predict`` / ``python predict.py``."""
    stop_on_signals("predict")
    from tasks.engine.inference.predict_cmd import main
    main()
