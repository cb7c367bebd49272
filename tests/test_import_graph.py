"""The house's floors, checked from the source: every import (module level and inside functions) of every
top-level package, no circles, and no arrow from a lower floor to a higher one (docs/architecture.md).

The top-level packages, from the ground up; each imports only the packages below it, and two packages on
one floor never import each other:

    sru/             the layer: imports nothing of the others
    tasks/           the engine and the tasks
    bench/           benchmarks and prepared checks
    reproduce/       the paper's tables, reproduction and report;  hydra_plugins/ (the Optuna sweeper)

Inside ``tasks/``:

    tasks/engine/   the machinery: imports sru at most, never tasks.common or a task folder
    tasks/common/   what tasks share: imports tasks.engine and sru
    tasks/corpora/  offline corpus builders: imports tasks.engine, tasks.common and sru, never a task folder
    tasks/<task>/   imports tasks.engine, tasks.common, tasks.corpora, sru and its own folder only

Inside the engine, its packages have floors of their own (``ENGINE_ALLOWED``), from the ground up:
``errors`` and ``run_metrics`` (import nothing of the engine), ``config/``, ``run/``, ``base`` (the task contract
and the registry), ``training/`` and ``sweeps/``, ``inference/``, and at the top the train command
(``train/``: ``runner``, ``run_start``, ``start_signals``, ``command``).

(The engine finds task folders by name, ``importlib.import_module`` in ``tasks/engine/base.py``:
a plugin lookup, not an import.)
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

ROOT = Path(__file__).resolve().parents[1]
# each top-level package's floor, from the ground up (hydra_plugins is a namespace package Hydra scans)
TOP_FLOORS = {"sru": 0, "tasks": 1, "bench": 2, "reproduce": 3, "hydra_plugins": 3}
PACKAGES = tuple(TOP_FLOORS)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path = ROOT) -> Set[str]:
    """Every module of this repository that ``path`` imports, anywhere in the file."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def graph(root: Path = ROOT) -> Dict[str, Set[str]]:
    files = [p for pkg in PACKAGES if (root / pkg).is_dir() for p in (root / pkg).rglob("*.py")]
    modules = {module_name(p, root): p for p in files}
    edges = {}
    for name, path in modules.items():
        # "from tasks.engine import distributed" names a module; "from x import function" names x
        targets = {t if t in modules else t.rpartition(".")[0] for t in imports_of(path, root)}
        edges[name] = {t for t in targets if t in modules and t != name}
    return edges


def floor_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "tasks":
        return parts[0]
    if len(parts) == 1:
        return "tasks"
    return {"engine": "engine", "common": "common", "corpora": "corpora"}.get(parts[1], f"task:{parts[1]}")


ALLOWED = {
    "sru": {"sru"},
    "engine": {"engine", "sru"},
    "common": {"common", "engine", "sru"},
    "corpora": {"corpora", "common", "engine", "sru"},
}


ENGINE_PACKAGES = ("run", "config", "training", "inference", "sweeps", "train")
_GROUND = {"errors", "run_metrics"}
ENGINE_ALLOWED = {
    "errors": set(),
    "run_metrics": set(),
    "config": {"errors"},
    "run": {"config", "errors"},
    "base": {"run", "config", "errors"},
    "training": {"base", "run", "config"} | _GROUND,
    "sweeps": {"run"} | _GROUND,
    "inference": {"training", "base", "run", "config"} | _GROUND,
    "train": {"inference", "sweeps", "training", "base", "run", "config"} | _GROUND,  # the train command
}


def engine_part(module: str) -> str:
    """``tasks.engine.run.lock`` -> ``run``; a module at the engine's root -> its own name."""
    parts = module.split(".")
    if parts[:2] != ["tasks", "engine"] or len(parts) < 3:
        return "face"
    return parts[2]


def test_no_import_circles():
    edges = graph()
    state: Dict[str, int] = {}
    stack: list = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_top_level_packages_import_only_the_floors_below():
    """sru < tasks < bench < reproduce, hydra_plugins: no package imports one above it or beside it."""
    bad = []
    for source, targets in graph().items():
        top = source.split(".")[0]
        bad += [f"{source} -> {t}" for t in targets
                if t.split(".")[0] != top and TOP_FLOORS[t.split(".")[0]] >= TOP_FLOORS[top]]
    assert not bad, "imports against the top-level floors:\n" + "\n".join(sorted(bad))


def test_the_graph_covers_every_top_level_package():
    """A new top-level package with Python modules must get a floor in TOP_FLOORS."""
    tops = {p.parent.name for p in ROOT.glob("*/*.py")} - {"tests", "scripts", "examples", "docs", "conf"}
    assert tops <= set(TOP_FLOORS), f"give these packages a floor in TOP_FLOORS: {sorted(tops - set(TOP_FLOORS))}"


def test_no_arrow_runs_back_up():
    bad = []
    for source, targets in graph().items():
        if not source.startswith(("sru", "tasks")):
            continue  # the packages above tasks are checked by the top-level floors
        floor = floor_of(source)
        allowed = ALLOWED.get(floor, {"engine", "common", "corpora", "sru", floor})
        bad += [f"{source} -> {t}" for t in targets if floor_of(t) not in allowed and floor != "tasks"]
    assert not bad, "imports against the floors:\n" + "\n".join(sorted(bad))


def test_engine_packages_keep_their_floors():
    """The engine's own picture (docs/architecture.md): each package imports only the floors below it."""
    bad, parts = [], set()
    for source, targets in graph().items():
        if floor_of(source) != "engine" or engine_part(source) == "face":
            continue
        part = engine_part(source)
        parts.add(part)
        allowed = ENGINE_ALLOWED.get(part)
        assert allowed is not None, f"{source}: a new engine package or root module; give it a floor in ENGINE_ALLOWED"
        bad += [f"{source} -> {t}" for t in targets
                if floor_of(t) == "engine" and engine_part(t) not in allowed | {part, "face"}]
    assert not bad, "imports against the engine's floors:\n" + "\n".join(sorted(bad))
    assert set(ENGINE_PACKAGES) <= parts


def test_an_engine_package_reaching_up_is_reported(tmp_path):
    """The engine's floors are checked: the config package importing the trainer is named."""
    edges = _tree(tmp_path, {"tasks/engine/training/trainer.py": "",
                             "tasks/engine/config/checks.py": "from tasks.engine.training import trainer\n"})
    assert "tasks.engine.training.trainer" in edges["tasks.engine.config.checks"]
    assert engine_part("tasks.engine.training.trainer") not in ENGINE_ALLOWED[engine_part("tasks.engine.config.checks")]


def test_no_folder_holds_more_than_15_modules():
    """Past ~15 modules a folder wants subpackages named for what they do (how tasks/engine/ was split)."""
    crowded = {}
    for top in ("sru", "tasks", "bench", "reproduce"):
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            modules = [p for p in folder.glob("*.py")]
            if len(modules) > 15:
                crowded[str(folder.relative_to(ROOT))] = len(modules)
    assert not crowded, f"folders over 15 modules: {crowded}"


def test_tasks_top_level_holds_only_engine_common_and_task_folders():
    top = sorted(p.name for p in (ROOT / "tasks").iterdir() if p.name != "__pycache__")
    loose = [name for name in top if name != "__init__.py" and not (ROOT / "tasks" / name / "__init__.py").is_file()]
    assert not loose, f"tasks/ should hold only packages (engine, common, corpora, task folders): {loose}"
    assert {"engine", "common", "corpora"} <= set(top)


def _tree(root: Path, files: Dict[str, str]) -> Dict[str, Set[str]]:
    """The import graph of a made-up tree: ``files`` maps paths under ``root`` to their source."""
    for rel, text in files.items():
        path = root / rel
        for package in [path.parent, *path.parent.parents]:
            if package == root:
                break
            package.mkdir(parents=True, exist_ok=True)
            (package / "__init__.py").touch()
        path.write_text(text)
    return graph(root)


def test_the_check_sees_imports_inside_functions(tmp_path):
    """The graph reads function-level and relative imports too: a lazy import cannot hide an arrow."""
    edges = _tree(tmp_path, {"tasks/common/encoders.py": "from . import batching\n", "tasks/common/batching.py": "",
                             "tasks/engine/training/trainer.py": "def f():\n    from tasks.common import encoders\n"})
    assert edges["tasks.engine.training.trainer"] == {"tasks.common", "tasks.common.encoders"}
    assert edges["tasks.common.encoders"] == {"tasks.common", "tasks.common.batching"}
    assert floor_of("tasks.common.encoders") not in ALLOWED["engine"]  # the arrow test would name it


def test_a_corpus_builder_importing_a_task_is_an_arrow_back_up(tmp_path):
    """The corpora floor is checked: a builder reaching into a task folder is reported."""
    edges = _tree(tmp_path, {"tasks/speech/text.py": "",
                             "tasks/corpora/voices.py": "from tasks.speech.text import normalize\n"})
    assert "tasks.speech.text" in edges["tasks.corpora.voices"]
    assert floor_of("tasks.corpora.voices") == "corpora" and floor_of("tasks.speech.text") not in ALLOWED["corpora"]
