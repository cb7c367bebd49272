"""Every link to a section of a Markdown file (``file.md#anchor`` or ``(#anchor)`` inside a doc), in
code or docs, names a heading that exists, so a renamed heading cannot leave a comment, a README
pointer or another doc pointing at nothing."""
import re
from pathlib import Path

from conftest import ROOT

SOURCES = ("sru", "scripts", "tasks", "reproduce", "docs", "tests", "conf")  # bench/docs_pages writes links relative to docs/
SUFFIXES = (".py", ".md", ".cpp", ".h", ".yaml")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(md: Path) -> set:
    """The anchors of a Markdown file's headings (lines in fenced code blocks are not headings)."""
    anchors, fenced = set(), False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            anchors.add(_anchor(line.lstrip("#")))
    return anchors


def _sources():
    this = Path(__file__).resolve()  # its docstring shows the link syntax
    return [ROOT / "README.md"] + [p for folder in SOURCES for p in (ROOT / folder).rglob("*")
                                   if p.suffix in SUFFIXES and p.is_file() and p.resolve() != this]


def _target(name: str, citing: Path):
    """The Markdown file a link names: relative to the citing file, the repository root or docs/."""
    for base in (citing.parent, ROOT, ROOT / "docs"):
        if (base / name).is_file():
            return (base / name).resolve()
    return None


def _cited():
    """{(target file, anchor): citing files} over every section link in the sources."""
    cited = {}
    for path in _sources():
        text = path.read_text()
        for name, anchor in re.findall(r"([\w./\-]*\w\.md)#([\w\-]+)", text):
            target = _target(name, path)
            key = (target or name, anchor)
            cited.setdefault(key, set()).add(str(path.relative_to(ROOT)))
        if path.suffix == ".md":
            for anchor in re.findall(r"\]\(#([\w\-]+)\)", text):
                cited.setdefault((path.resolve(), anchor), set()).add(str(path.relative_to(ROOT)))
    return cited


def test_spec_section_references_exist():
    spec = (ROOT / "docs" / "spec.md").resolve()
    cited = {anchor for (target, anchor) in _cited() if target == spec}
    # the kernels and their docs cite the spec: if none is found, the link check finds nothing
    assert {"forward-recurrence", "backward", "memory-layout"} <= cited, cited


def test_section_links_exist():
    missing = {}
    for (target, anchor), paths in _cited().items():
        if not isinstance(target, Path):
            missing[f"{target}#{anchor}"] = sorted(paths) + ["(no such file)"]
        elif anchor not in _anchors(target):
            missing[f"{target.relative_to(ROOT.resolve())}#{anchor}"] = sorted(paths)
    assert not missing, f"links to sections that do not exist: {missing}"


def test_paper_numbers_doc_lists_every_reported_number():
    """docs/paper_numbers.md is where reproduce/tables.py's ``reported`` numbers are cited from."""
    from reproduce.tables import TABLES

    doc = (ROOT / "docs" / "paper_numbers.md").read_text()
    reported = {c.reported for t in TABLES.values() for c in t.cells if c.reported is not None}
    assert len(reported) >= 5, reported
    missing = sorted(r for r in reported if f"{r:g}" not in doc)
    assert not missing, f"reported in reproduce/tables.py but not in docs/paper_numbers.md: {missing}"


def test_relative_file_links_exist():
    """Every Markdown link to a file of the repository (``[text](../tasks/engine/base.py)``) names one that
    exists, so moving a module cannot leave a doc pointing at its old place."""
    missing = {}
    for md in [p for p in _sources() if p.suffix == ".md"]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", md.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            if not (md.parent / target).exists():
                missing.setdefault(str(md.relative_to(ROOT)), []).append(target)
    assert not missing, f"links to files that do not exist: {missing}"


def test_repository_paths_named_in_docs_exist():
    """Every source path a doc names in passing (``tasks/common/encoders.py``, ``python -m bench.speed``)
    exists: the docs follow the code when modules move."""
    pattern = r"\b(?:tasks|sru|scripts|tests|conf|docs|bench)/[\w./\-]+\.(?:py|md|yaml|cpp|h)\b"
    missing = {}
    for md in [p for p in _sources() if p.suffix == ".md"]:
        # a line that says where a removed file went ("scripts/x.py, removed; see commit abc1234") may name it
        lines = [line for line in md.read_text().splitlines() if not REMOVED_NOTE.search(line)]
        for path in sorted(set(re.findall(pattern, "\n".join(lines)))):
            if not (ROOT / path).exists():
                missing.setdefault(str(md.relative_to(ROOT)), []).append(path)
    assert not missing, f"paths that do not exist: {missing}"


REMOVED_NOTE = re.compile(r"\bremoved; see commit [0-9a-f]{7,40}\b")


def test_a_removed_file_note_must_name_a_commit():
    assert REMOVED_NOTE.search("(scripts/time_classification.py, removed; see commit f6517df)")
    assert not REMOVED_NOTE.search("(scripts/time_classification.py, removed)")
    assert not REMOVED_NOTE.search("removed; see commit HEAD")
