"""Is this data file text? A binary file (an executable, random bytes, a model) given as a text data file
used to be accepted, read with replacement characters and trained on ("vocab 131"): refuse it instead.

    check_text(head_bytes, path, key)    # raises DataError naming the file and the config key

The check looks at the file's first ``SAMPLE_BYTES``: they must decode as UTF-8 (a character cut at the
end of the sample is fine) and at least ``MIN_PRINTABLE`` of the characters must be printable or
whitespace. Real corpora pass easily (PTB, wikitext, MR: 100%); an ELF binary or /dev/urandom bytes fail
on the first rule, UTF-16 text or mostly-control-character files on the second.
"""
from __future__ import annotations

import codecs
from pathlib import Path

from tasks.engine.errors import DataError

SAMPLE_BYTES = 1 << 20
MIN_PRINTABLE = 0.95


def check_text(head: bytes, path: Path, key: str) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    fix = f"give {key} a UTF-8 text file"
    try:
        text = decoder.decode(head, final=False)  # an incomplete last character of the sample is not an error
    except UnicodeDecodeError as err:
        raise DataError(f"{path} ({key}) is not a UTF-8 text file: byte {err.start} ({head[err.start:err.start + 1]!r}) "
                        f"is not valid UTF-8 (a binary or otherwise encoded file?); {fix}") from None
    if not text:
        return  # empty files are judged by the task (an empty split names its file)
    printable = sum(ch.isprintable() or ch in "\n\r\t\f\v" for ch in text)
    if printable / len(text) < MIN_PRINTABLE:
        raise DataError(f"{path} ({key}) does not look like text: only {printable / len(text):.0%} of its first "
                        f"{len(text):,} characters are printable (at least {MIN_PRINTABLE:.0%} expected); {fix}")


def check_text_file(path: Path, key: str) -> None:
    """``check_text`` on the first bytes of an uncompressed file."""
    with open(path, "rb") as f:
        check_text(f.read(SAMPLE_BYTES), Path(path), key)
