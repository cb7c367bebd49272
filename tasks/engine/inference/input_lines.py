"""predict.py's input, read as bytes and decoded line by line (docs/inference.md#inputs): a line that is
not UTF-8 is a line error naming the file and the line (the other lines still run); input holding NUL
bytes is binary (an audio file, a model file) and refused whole, as evaluate.py's data readers do."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Union

from tasks.engine.inference.loader import InferenceInputError


class BadLine(str):
    """A line that could not be decoded: its text is the reason (parse_input is not called on it)."""


Line = Union[str, BadLine]


def read_lines(source: str, positional: List[str]) -> List[Line]:
    """The inputs, one per line (or the positional words); a non-UTF-8 line becomes a ``BadLine``."""
    if positional:
        return list(positional)
    name = "stdin" if source == "-" else source
    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(source).expanduser()
        if path.is_dir():
            raise InferenceInputError(f"input={path}: a directory, not a file; pass a file with one input per line")
        if not path.is_file() and not path.exists():
            raise InferenceInputError(f"input={path}: no such file; pass a file with one input per line, or - "
                                      f"for stdin")
        data = path.read_bytes()
    if b"\x00" in data:
        line = data[:data.index(b"\x00")].count(b"\n") + 1
        raise InferenceInputError(f"input={name}: binary data (a NUL byte on line {line}), not text; give one input "
                                  f"per line as UTF-8 text (audio: one file path per line)")
    return [decode_line(raw) for raw in data.splitlines()]  # bytes split on \n, \r\n, \r only


def decode_line(raw: bytes) -> Line:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return BadLine(f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}); save the "
                       f"input as UTF-8 (iconv -t utf-8)")

