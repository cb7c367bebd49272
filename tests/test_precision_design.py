"""Precision is decided in few places (issue 67): the files of sru/, tasks/, bench/ (and reproduce/, hydra_plugins/,
scripts/) that branch on a precision themselves, rather than through ``sru.Precision`` (sru/ops/precision.py) and the route table
(sru/ops/cpu/routes.py), stay at most five.

A *precision decision*, read from the syntax tree (comments and docstrings do not count):
- a comparison (``==``, ``!=``, ``is``, ``is not``, ``in``, ``not in``) with a precision value: a ``Precision.X``
  member, a precision name as a string literal ("fp32", "bf16", "fp16", "int8"), or a half-precision dtype
  (``torch.bfloat16``, ``torch.float16``, ``torch.half``), alone or in a literal tuple/list/set;
- a call of torch's autocast API (``torch.autocast``, ``torch.*.amp.autocast``, ``torch.is_autocast_enabled``,
  ``torch.get_autocast_dtype``, ``torch.set_autocast_*``): reading or setting the global precision state.
Asking the type (``Precision(name).scales_loss``, ``.autocast(device)``, ``recurrence_dtype``, ``of_autocast``)
or passing a precision on (``precision=...``) is not a decision: that is where the decisions were moved.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("sru", "tasks", "bench", "reproduce", "hydra_plugins", "scripts")  # every package
NAMES = {"fp32", "bf16", "fp16", "int8"}
HALF_DTYPES = {"bfloat16", "float16", "half"}
AUTOCAST_API = {"autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
                "set_autocast_dtype"}
# the places that decide: the type, the projection routes, the model conversion, the commands' precision
# option, and the bench's table of candidates per dtype
DECIDING = {"sru/ops/precision.py", "sru/ops/cpu/routes.py", "sru/quantize.py", "tasks/engine/inference/precision.py",
            "bench/registry.py"}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _precision_value(node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_precision_value(element) for element in node.elts)
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    name = _dotted(node)
    return name.startswith("Precision.") or (name.startswith("torch.") and name.split(".")[-1] in HALF_DTYPES)


def decisions(source: str):
    """(line, kind) of every precision decision in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(map(_precision_value, [node.left, *node.comparators])):
            yield node.lineno, "comparison with a precision value"
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.startswith("torch.") and name.split(".")[-1] in AUTOCAST_API:
                yield node.lineno, name


def deciding_files():
    found = {}
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            hits = list(decisions(path.read_text(encoding="utf-8")))
            if hits:
                found[path.relative_to(ROOT).as_posix()] = hits
    return found


@pytest.mark.parametrize("snippet", [
    'if precision == "bf16": pass', "x = p is Precision.INT8", "ok = t.dtype in (torch.float16, torch.bfloat16)",
    'with torch.autocast("cpu", dtype=d): pass', 'on = torch.is_autocast_enabled("cpu")',
    "with torch.cuda.amp.autocast(): pass"])
def test_the_scan_sees_each_kind_of_decision(snippet):
    assert list(decisions(snippet))


@pytest.mark.parametrize("snippet", [
    "scaler = Precision(name).scales_loss", "ctx = Precision(name).autocast(device)",
    "m = to_precision(model, precision=Precision.BF16)", "# if precision == 'bf16'",
    'def f():\n    """autocast when precision == "bf16"."""'])
def test_asking_the_type_or_passing_a_precision_on_is_no_decision(snippet):
    assert not list(decisions(snippet))


def test_precision_is_decided_in_at_most_five_files():
    found = deciding_files()
    outside = {path: hits for path, hits in found.items() if path not in DECIDING}
    assert not outside, ("precision decided outside the five places; ask sru.Precision / sru.ops.precision or pass "
                         f"the precision on: {outside}")
    assert len(DECIDING) <= 5 and set(found) <= DECIDING
