"""Is this data file text? A binary file (an executable, random bytes, a model) given as a text data file
used to be accepted, read with replacement characters and trained on ("vocab 131"): refuse it instead.

    check_text(head_bytes, path, key)    # raises DataError naming the file and the config key

The check decodes the file's first ``SAMPLE_BYTES`` as UTF-8 and wants at least ``MIN_PRINTABLE`` of the
characters to be printable or whitespace, counting each undecodable byte as not printable. Real corpora
pass easily (PTB, wikitext, MR: 100%); an ELF binary, /dev/urandom bytes, UTF-16 text (every other byte
NUL) or a file of control characters do not.
"""
from __future__ import annotations

import codecs
from pathlib import Path

from tasks.engine.errors import DataError

SAMPLE_BYTES = 1 << 20
MIN_PRINTABLE = 0.95


def check_text(head: bytes, path: Path, key: str) -> None:
    # an incomplete last character of the sample is not an error; a few stray bytes (a Latin-1 accent in a
    # UTF-8 corpus) are tolerated as before (read with replacement characters), a binary file is not
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(head, final=False)
    if not text:
        return  # empty files are judged by the task (an empty split names its file)
    good = sum((ch.isprintable() and ch != "\ufffd") or ch in "\n\r\t\f\v" for ch in text)
    if good / len(text) < MIN_PRINTABLE:
        raise DataError(f"{path} ({key}) is not a text file: only {good / len(text):.0%} of its first {len(text):,} "
                        f"characters are printable UTF-8 (at least {MIN_PRINTABLE:.0%} expected; a binary file, or "
                        f"text in another encoding such as UTF-16?); give {key} a UTF-8 text file")


def check_text_file(path: Path, key: str) -> None:
    """``check_text`` on the first bytes of an uncompressed file."""
    with open(path, "rb") as f:
        check_text(f.read(SAMPLE_BYTES), Path(path), key)
