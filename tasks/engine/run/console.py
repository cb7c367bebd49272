"""The console of a run, also written to ``<run dir>/train.log``.

Hydra's ``train.log`` only receives ``logging`` records (in practice one matplotlib line), while the
trainer prints: ``tee_console`` copies stdout and stderr into that file as well, so the log holds what
the terminal showed (training records, evaluations, errors). Progress-bar redraws (chunks with a
carriage return) stay on the terminal only: they would fill the file with thousands of partial lines.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import IO, Iterator


class _Tee:
    def __init__(self, stream: IO[str], log: IO[str]):
        self._stream, self._log = stream, log

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        if "\r" not in text and not self._log.closed:
            self._log.write(text)
        return written

    def flush(self) -> None:
        self._stream.flush()
        if not self._log.closed:
            self._log.flush()

    def __getattr__(self, name: str):  # isatty, fileno, encoding ...: the terminal's
        return getattr(self._stream, name)


@contextlib.contextmanager
def tee_console(log_path: Path) -> Iterator[None]:
    """Inside: what is printed to stdout/stderr is appended to ``log_path`` too (a resumed run continues it)."""
    try:
        log = open(log_path, "a", encoding="utf-8", buffering=1)
    except OSError:  # an unwritable log must not stop the run: the console still shows everything
        yield
        return
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(out, log), _Tee(err, log)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err
        log.close()
