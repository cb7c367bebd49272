"""The one output rule of ``evaluate.py`` and ``predict.py`` (docs/inference.md#where-results-go).

Checked before any work (``check_output_file``, ``check_out_dir``), refused in one line: an ``output=`` /
``out_dir=`` that
- is the input (``input=`` or an input file given as a word): the inputs would be lost;
- is, or lies inside, a run directory (``RUN_MARKERS``), or is the model file ``run=`` names, however the run was named
  (``run=<dir>``, ``run=<dir>/model.pt``, ``run=<dir>/checkpoints/best.pt``, ``run=m.pt``) and through any
  symlink or hard link: a run's ``model.pt``, ``checkpoints/``, ``results.json``, metrics and predictions
  files are never replaced by a command that only reads the run;
- is an existing PyTorch model file anywhere (a zip archive: predictions never go there);
- lies in a folder that does not exist or cannot be written (found before the predictions are computed).
Written (``write_output``) as a shell redirection writes: through a symlink to its target, into a FIFO
or a device as it is; a regular file is replaced atomically (a crash leaves the old file or the new one).
An empty ``output=`` (or ``-``) is stdout.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

from tasks.engine.inference.options import OptionError
from tasks.engine.run.interrupts import write_text_atomic

# What makes a folder a run directory: files train.py writes (a folder holding only a copied model.pt, or a
# "checkpoints" folder of some other tool, is not one)
RUN_MARKERS = (".hydra", "results.json", "metrics.jsonl", "checkpoints/best.pt", "checkpoints/last.pt")
ZIP_MAGIC = b"PK\x03\x04"  # torch.save's format


def is_stdout(target: Optional[str]) -> bool:
    return target in ("", "-")


def enclosing_run_dir(path: Path) -> Optional[Path]:
    """The run directory ``path`` is or lies in (the nearest folder up holding a run's files), or None."""
    for folder in (path, *path.parents):
        if folder.is_dir() and any((folder / marker).exists() for marker in RUN_MARKERS):
            return folder
    return None


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _is_model_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ZIP_MAGIC
    except OSError:
        return False


def check_output_file(name: str, target: str, run: Any, inputs: Iterable[Any] = ()) -> None:
    """``name=target`` (a file the command will write) against the rule above; stdout passes."""
    if is_stdout(target):
        return
    path = Path(target).expanduser()
    where = f"{name}={target}"
    if name == "export":  # a new file only, so it may go beside a run's files (an older run gets its model.pt)
        if path.exists() or path.is_symlink():
            raise OptionError(f"{where}: the file exists and is never overwritten; remove it or pick another name")
        _check_folder(where, Path(os.path.realpath(path)).parent)
        return
    for source in inputs:
        if source not in (None, "", "-") and Path(str(source)).expanduser().exists() and \
                _same(path, Path(str(source)).expanduser()):
            raise OptionError(f"{where}: the input file itself; its inputs would be lost. Write the results "
                              f"to another file")
    run_path = Path(str(run)).expanduser()
    if run_path.exists() and path.exists() and _same(path, run_path):
        raise OptionError(f"{where}: the model file run= names; it would be replaced by the results. Write them "
                          f"to another file")
    real = Path(os.path.realpath(path))
    _check_outside_runs(where, real.parent if not real.is_dir() else real)
    if path.is_dir():
        raise OptionError(f"{where}: a directory, not a file; name the file to write")
    if path.exists() and stat.S_ISREG(path.stat().st_mode) and _is_model_file(path):
        raise OptionError(f"{where}: an existing PyTorch model file, never replaced by results; write them to "
                          f"another file")
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):  # a FIFO, a device: written as it is
        if not os.access(path, os.W_OK):
            raise OptionError(f"{where}: cannot be written (permission denied)")
        return
    _check_folder(where, real.parent)


def _check_folder(where: str, folder: Path) -> None:
    if not folder.is_dir():
        raise OptionError(f"{where}: the folder {folder} does not exist; create it first (mkdir -p {folder})")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OptionError(f"{where}: the folder {folder} cannot be written (permission denied); pick another")


def check_out_dir(target: str, run: Any) -> None:
    """``out_dir=`` (a folder evaluate.py creates or adds files to)."""
    path = Path(os.path.realpath(Path(target).expanduser()))
    where = f"out_dir={target}"
    if path.exists() and not path.is_dir():
        raise OptionError(f"{where}: an existing file, not a folder; name a folder for the predictions files")
    _check_outside_runs(where, path)
    run_path = Path(str(run)).expanduser()
    if run_path.is_dir() and Path(os.path.realpath(run_path)) in (path, *path.parents):
        raise OptionError(f"{where}: inside the run directory {run_path}, which evaluate.py never writes into; "
                          f"pick a folder outside it")
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise OptionError(f"{where}: {existing} cannot be written into (permission denied or not a folder); "
                          f"pick another folder")


def _check_outside_runs(where: str, folder: Path) -> None:
    run_dir = enclosing_run_dir(folder)
    if run_dir is not None:
        raise OptionError(f"{where}: inside the run directory {run_dir}, whose files (model.pt, checkpoints/, "
                          f"results.json, metrics, predictions) evaluate.py and predict.py never replace; "
                          f"write outside it")


def write_output(target: str, text: str) -> None:
    """``text`` to stdout, through a symlink, into a FIFO or device as it is, or atomically into a file."""
    if is_stdout(target):
        sys.__stdout__.write(text)
        sys.__stdout__.flush()
        return
    path = Path(target).expanduser()
    try:
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            return
        write_text_atomic(Path(os.path.realpath(path)), text)  # a symlink keeps pointing at the new file
    except OSError as err:
        raise OSError(f"output={target}: could not be written ({err.strerror or err}); the file is as it "
                      f"was") from None
