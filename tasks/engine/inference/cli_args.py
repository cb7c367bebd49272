"""Argument handling shared by ``evaluate.py`` and ``predict.py``: Hydra-style ``key=value`` words,
without Hydra (these commands make no run directory and write nothing into one).

    given, overrides, positional = split_arguments(argv, command_options("predict"))

A word ``key=value`` with a known ``key`` is an option, kept as the text given (``command_options.py``
checks and converts it); a dotted ``task.*`` / ``trainer.*`` key is an override of the saved config; a
word without ``=`` is positional (predict.py: input files). Every error is one line and exit status 2
(``one_line_errors``).
"""
from __future__ import annotations

import contextlib
import difflib
import os
import sys
from typing import Any, Collection, Dict, Iterator, List, Sequence, Tuple

from tasks.engine.errors import RunError
from tasks.engine.inference.loader import InferenceInputError

EXIT_BAD_INPUT = 2
OVERRIDABLE_GROUPS = ("task", "trainer")  # the model's shape comes from the weights: model.* cannot change


def split_arguments(argv: Sequence[str], known: Collection[str]) -> Tuple[Dict[str, Any], List[str], List[str]]:
    """The options given (key -> text as given; ``output=`` is ``""``), the overrides, the positional words."""
    given, overrides, positional = {}, [], []
    for word in argv:
        key, sep, value = word.partition("=")
        if not sep:
            positional.append(word)
        elif key.split(".")[0] in OVERRIDABLE_GROUPS and "." in key:
            overrides.append(word)
        elif key in known:
            if key in given:
                raise InferenceInputError(f"{key}= given twice ({key}={given[key]} and {word}); give it once")
            given[key] = value
        else:
            close = difflib.get_close_matches(key, [*known, "task.", "trainer."], n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise InferenceInputError(f"{key}: not an option{hint}; expected one of {sorted(known)}, or task.* / "
                                      f"trainer.* keys of the saved config")
    return given, overrides, positional


@contextlib.contextmanager
def one_line_errors(command: str) -> Iterator[None]:
    """A bad path, checkpoint, option, data file or input: ``[command] error: ...`` and exit 2, no traceback
    (``SRU_FULL_ERROR=1`` shows it)."""
    try:
        yield
    except (RunError, OSError, ValueError, KeyError) as err:
        if os.environ.get("SRU_FULL_ERROR") == "1":
            raise
        text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        print(f"[{command}] error: {' '.join(str(text).split())}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
