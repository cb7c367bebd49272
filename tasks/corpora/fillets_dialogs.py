"""Fish Fillets NG dialogue scripts (``script/<level>/dialogs_<lang>.lua``): the translated line of every
recorded dialogue id.

    lines = parse_dialogs(Path(".../script/barrel/dialogs_cs.lua"))
    lines[0]  -> DialogLine(id="bar-v-videt0", font="font_big", english="Somebody from Greenpeace ...",
                            text="To by měli vidět lidi z Greenpeace.", line=2)

The files are Lua: ``dialogId("<id>", "<font>", "<English source>")`` followed by
``dialogStr("<translation>")``, with ``--`` comments; a call may span lines. This is a small tokenizer for
exactly that subset (string literals with Lua's backslash escapes, names, parentheses, commas, comments), not
a Lua interpreter: anything else is a malformed script and one error names the file and line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Tuple

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "/": "/", "r": "", "a": "", "b": "", "f": "",
            "v": "", "\n": "\n"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class DialogLine:
    id: str
    font: str       # the speaking character's subtitle font: font_small, font_big, font_statue, ...
    english: str    # the English source line
    text: str       # the translation, as spoken in the recording
    line: int       # 1-based line of the dialogId call in its file


class ScriptError(ValueError):
    pass


def _tokens(source: str, path: Path) -> Iterator[Tuple[str, str, int]]:
    """(kind, value, line) for kinds name, string, punct ('(' ')' ',')."""
    i, line, n = 0, 1, len(source)
    while i < n:
        ch = source[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch in " \t\r\ufeff;":
            i += 1
        elif source.startswith("--", i):  # comment to the end of the line
            while i < n and source[i] != "\n":
                i += 1
        elif ch in "(),":
            yield "punct", ch, line
            i += 1
        elif ch in "\"'":
            start_line, out, i = line, [], i + 1
            while True:
                if i >= n or source[i] == "\n":
                    raise ScriptError(f"{path}:{start_line}: unterminated string literal (a dialogue string must "
                                      f"close with {ch} on its line)")
                c = source[i]
                if c == ch:
                    i += 1
                    break
                if c == "\\" and i + 1 < n:
                    esc = source[i + 1]
                    if esc not in _ESCAPES:
                        raise ScriptError(f"{path}:{line}: unknown escape \\{esc} in a string literal")
                    out.append(_ESCAPES[esc])
                    line += esc == "\n"
                    i += 2
                    continue
                out.append(c)
                i += 1
            yield "string", "".join(out), start_line
        else:
            m = _NAME.match(source, i)
            if not m:
                raise ScriptError(f"{path}:{line}: unexpected character {ch!r}; a dialogue script holds only "
                                  f'dialogId("id", "font", "English") / dialogStr("text") calls and -- comments')
            yield "name", m.group(), line
            i = m.end()


def _call(tokens: Iterator[Tuple[str, str, int]], name: str, line: int, path: Path) -> List[str]:
    """The string arguments of ``name( "a", "b" ... )`` after its name token."""
    kind, value, at = next(tokens, ("eof", "", line))
    if (kind, value) != ("punct", "("):
        raise ScriptError(f"{path}:{at}: expected '(' after {name}")
    args: List[str] = []
    while True:
        kind, value, at = next(tokens, ("eof", "", at))
        if kind == "string":
            args.append(value)
            kind, value, at = next(tokens, ("eof", "", at))
            if (kind, value) == ("punct", ","):
                continue
        if (kind, value) == ("punct", ")"):
            return args
        raise ScriptError(f"{path}:{at}: malformed {name}(...) call started on line {line}: expected string "
                          f"arguments separated by commas and a closing ')', found {value or 'the end of the file'!r}")


def parse_dialogs(path: Path) -> List[DialogLine]:
    """Every dialogId with its dialogStr, in file order; a dialogId without a translation is kept with
    text "" (the caller drops it as a clip without text)."""
    path = Path(path)
    tokens = _tokens(path.read_text(encoding="utf-8"), path)
    out: List[DialogLine] = []
    pending = None
    for kind, value, line in tokens:
        if kind != "name" or value not in ("dialogId", "dialogStr"):
            raise ScriptError(f"{path}:{line}: unexpected {value!r}; a dialogue script holds only "
                              f'dialogId("id", "font", "English") / dialogStr("text") calls and -- comments')
        args = _call(tokens, value, line, path)
        if value == "dialogId":
            if len(args) != 3:
                raise ScriptError(f"{path}:{line}: dialogId takes 3 strings (id, font, English), received {len(args)}")
            if pending is not None:
                out.append(pending)
            pending = DialogLine(id=args[0], font=args[1], english=args[2], text="", line=line)
        else:
            if len(args) != 1:
                raise ScriptError(f"{path}:{line}: dialogStr takes 1 string, received {len(args)}")
            if pending is None:
                raise ScriptError(f"{path}:{line}: dialogStr without a dialogId before it")
            pending.text = args[0]
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out
