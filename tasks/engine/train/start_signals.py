"""SIGINT / SIGTERM while ``train.py`` starts: after its imports (``interrupts.stop_on_signals``
handles those), before the run context's ``StopSignals`` takes over.

    run_app(main)   # Hydra's app: a signal while Hydra composes or makes the run dir -> one line, status 128+N

In that window Hydra is creating the run dir and writing ``.hydra/``; the early handler, which exits at
once, would leave it half made, and Python's own KeyboardInterrupt printed a traceback from Hydra's code.
Here either signal raises ``KeyboardInterrupt`` (named), the command ends in one line, and a new run dir
this process resolved (``FRESH_RUN_DIRS``, filled by the runner's ``run_dir`` resolver) is removed while it
holds nothing of a run.
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Callable, Set

from tasks.engine.run.dirs import remove_if_unused

FRESH_RUN_DIRS: Set[str] = set()  # new run dirs this process resolved: removed if a signal stops the start


def _interrupt(signum: int, frame=None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stopped_before_training(stop: KeyboardInterrupt) -> SystemExit:
    name = str(stop) if str(stop) in ("SIGINT", "SIGTERM") else "SIGINT"  # a plain Ctrl-C has no name
    print(f"[train] stopped by {name} before training started; nothing saved", file=sys.stderr, flush=True)
    return SystemExit(128 + getattr(signal, name))


def run_app(main: Callable[[], object]) -> None:
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        main()
    except KeyboardInterrupt as stop:
        for run_dir in FRESH_RUN_DIRS:
            remove_if_unused(Path(run_dir))
        raise stopped_before_training(stop) from None
