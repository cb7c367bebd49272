"""The fast tier stays fast and honest (issue 42, item 6): a test that trains (the ``run_train`` fixture, the
trainer's ``fit``) or launches a process (``subprocess``) carries ``@pytest.mark.slow``, read from the
test files themselves. A module-level helper that does either makes every test calling it slow too.
(Kernel builds: tests/test_ops_build.py, all marked. Time: ``pytest -m "not slow" --durations=0``.)
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

import pytest
from conftest import ROOT

# Tests that call run_train only to see it refuse the config or the data before the first step.
REFUSED_BEFORE_TRAINING = {
    "test_empty_validation_file_names_file_split_and_key",
    "test_a_binary_lm_data_file_is_refused_naming_file_and_key",
}


def _is_slow_mark(node: ast.AST) -> bool:
    return "mark.slow" in ast.unparse(node)


def _module_is_slow(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
               and _is_slow_mark(n.value) for n in tree.body)


def _direct_cost(func: ast.FunctionDef) -> Set[str]:
    """What in this function's own body trains or starts a process."""
    found = {"run_train"} if any(a.arg == "run_train" for a in func.args.args) else set()
    for node in ast.walk(func):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "subprocess":
            found.add("subprocess")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("fit", "fit_in_run"):
            found.add("fit")
    return found


def _calls(func: ast.FunctionDef) -> Set[str]:
    return {n.func.id for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def unmarked_costly_tests(path: Path) -> Dict[str, Set[str]]:
    tree = ast.parse(path.read_text(), str(path))
    if _module_is_slow(tree):
        return {}
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    cost = {name: _direct_cost(f) for name, f in funcs.items()}
    changed = True
    while changed:  # a helper that trains makes its callers train
        changed = False
        for name, f in funcs.items():
            inherited = set().union(*(cost[c] for c in _calls(f) if c in cost and c != name))
            if not inherited <= cost[name]:
                cost[name] |= inherited
                changed = True
    return {name: cost[name] for name, f in funcs.items()
            if name.startswith("test_") and cost[name] and name not in REFUSED_BEFORE_TRAINING
            and not any(_is_slow_mark(d) for d in f.decorator_list)}


def test_every_test_that_trains_or_starts_a_process_is_slow():
    files = sorted((ROOT / "tests").glob("test_*.py"))
    assert len(files) > 50
    found = {f"{p.name}::{name}": sorted(why) for p in files for name, why in unmarked_costly_tests(p).items()}
    assert not found, f"add @pytest.mark.slow: {found}"


def test_the_tier_scan_sees_fixtures_calls_helpers_and_marks(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import subprocess\nimport pytest\n"
        "def _train(run_train):\n    return run_train([], None)\n"
        "def test_uses_fixture(run_train):\n    run_train([], None)\n"
        "def test_uses_helper():\n    _train(None)\n"
        "def test_starts_a_process():\n    subprocess.run(['true'])\n"
        "def test_fits():\n    fit(None, None, None)\n"
        "@pytest.mark.slow\ndef test_marked(run_train):\n    run_train([], None)\n"
        "def test_cheap():\n    assert 1\n")
    assert sorted(unmarked_costly_tests(sample)) == ["test_fits", "test_starts_a_process", "test_uses_fixture",
                                                     "test_uses_helper"]
    sample.write_text("import pytest\npytestmark = pytest.mark.slow\ndef test_a(run_train):\n    pass\n")
    assert unmarked_costly_tests(sample) == {}


@pytest.mark.parametrize("name", sorted(REFUSED_BEFORE_TRAINING))
def test_the_exempt_tests_exist(name):
    """An exemption outliving its test would hide a renamed test that trains."""
    assert any(f"def {name}(" in p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
