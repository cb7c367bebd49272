"""No module of the layer reaches into another's private names (issue 67): read from the source.

Two checks over every file of ``sru/``:

- no import of a private name (``from sru.x import _y``, relative or absolute) from another file;
- no attribute access ``obj._name`` (read or write) on anything but ``self`` / ``cls`` where ``_name`` is a
  private name that the layer itself defines (a method, property or class attribute, a ``self._name = ...``
  in a class, a module-level function or variable) in another file only. A class's own private members are
  used through ``self``; another module asks for them by a public name.

torch's own private API (``module._parameters``, ``torch._C``, ...) is not the layer's and is not counted
here: the inference paths read ``_parameters`` on purpose (``nn.Module.__getattr__`` costs ~1 us a call).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def module_private_names(trees: Dict[str, ast.AST]) -> Dict[str, Set[str]]:
    """Private module-level name (function, class, variable) -> the files that define it."""
    found: Dict[str, Set[str]] = {}
    for path, tree in trees.items():
        for node in tree.body:
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [leaf.id for target in targets for leaf in ast.walk(target) if isinstance(leaf, ast.Name)]
            for name in filter(_private, names):
                found.setdefault(name, set()).add(path)
    return found


def member_private_names(trees: Dict[str, ast.AST]) -> Dict[str, Set[str]]:
    """Private class member (method, property, class attribute, ``self.<name> =``) -> the files that define it."""
    found: Dict[str, Set[str]] = {}

    def add(name: str, path: str) -> None:
        if _private(name):
            found.setdefault(name, set()).add(path)

    for path, tree in trees.items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    add(node.name, path)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                        if isinstance(target, ast.Name):
                            add(target.id, path)
            for node in ast.walk(cls):
                if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                        and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    add(node.attr, path)
    return found


def imported_names(tree: ast.AST) -> Set[str]:
    """The names a file binds by importing (modules and what is taken from them)."""
    return {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}


def reached(node: ast.Attribute, members: Dict[str, Set[str]], modules: Dict[str, Set[str]],
            imported: Set[str]) -> Set[str]:
    """The files whose private name ``node`` reaches: any object's member, or an imported module's name."""
    owner = node.value.id if isinstance(node.value, ast.Name) else None
    if not _private(node.attr) or owner in ("self", "cls"):
        return set()
    return members.get(node.attr, set()) | (modules.get(node.attr, set()) if owner in imported else set())


def violations(trees: Dict[str, ast.AST]) -> List[str]:
    members, modules = member_private_names(trees), module_private_names(trees)
    found = []
    for path, tree in trees.items():
        imported = imported_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("sru")):
                found += [f"{path}:{node.lineno}: imports the private {alias.name} of {node.module}"
                          for alias in node.names if _private(alias.name)]
            elif isinstance(node, ast.Attribute):
                owners = reached(node, members, modules, imported)
                if owners and path not in owners:
                    found.append(f"{path}:{node.lineno}: reaches into {node.attr} (defined in "
                                 f"{', '.join(sorted(owners))})")
    return found


def layer_trees(root: Path = ROOT) -> Dict[str, ast.AST]:
    return {str(p.relative_to(root)): ast.parse(p.read_text(), str(p)) for p in sorted((root / "sru").rglob("*.py"))}


def test_no_module_of_the_layer_reaches_into_another():
    assert violations(layer_trees()) == []


@pytest.mark.parametrize("source, expected", [
    ("def use(cell):\n    return cell._mask(3)\n", "reaches into _mask"),
    ("def use(cell):\n    cell._cache = 1\n", "reaches into _cache"),
    ("from sru import a\n\ndef use():\n    return a._helper\n", "reaches into _helper"),
    ("from sru.a import _helper\n", "imports the private _helper"),
    ("from .a import _helper\n", "imports the private _helper"),
])
def test_the_check_finds_a_reach(source, expected):
    """The check itself: each snippet, as a second file beside the owner, is reported."""
    owner = ("import torch\n_helper = 1\n\nclass Cell:\n    def _mask(self, n):\n        return n\n\n"
             "    def fill(self):\n        self._cache = 0\n")
    trees = {"sru/a.py": ast.parse(owner), "sru/b.py": ast.parse(source)}
    found = violations(trees)
    assert len(found) == 1 and found[0].startswith("sru/b.py") and expected in found[0], found
    assert violations({"sru/a.py": ast.parse(owner)}) == []  # a file's own private names are its own
    # a module-level name only through the module: another object's attribute of that name is not it
    assert violations({"sru/a.py": ast.parse(owner), "sru/c.py": ast.parse("def f(t):\n    return t._helper\n")}) == []
