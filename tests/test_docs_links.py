"""Every reference to a section of docs/spec.md (``spec.md#anchor``), in code or docs, names a
section that exists, so the kernels' comments cannot point at a heading that was renamed."""
import re

from conftest import ROOT

SPEC = ROOT / "docs" / "spec.md"
SOURCES = ("sru", "scripts", "tasks", "docs")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_spec_section_references_exist():
    anchors = {_anchor(line.lstrip("#")) for line in SPEC.read_text().splitlines()
               if line.startswith("#")}
    files = [ROOT / "README.md"] + [p for folder in SOURCES for p in (ROOT / folder).rglob("*")
                                    if p.suffix in (".py", ".md", ".cpp")]
    cited = {}
    for path in files:
        for anchor in re.findall(r"spec\.md#([\w\-]+)", path.read_text()):
            cited.setdefault(anchor, set()).add(str(path.relative_to(ROOT)))
    # the kernels and their docs cite the spec: if none is found, this test finds nothing
    assert {"forward-recurrence", "backward", "memory-layout"} <= set(cited), cited
    missing = {a: sorted(paths) for a, paths in cited.items() if a not in anchors}
    assert not missing, f"sections not in docs/spec.md: {missing} (headings give {sorted(anchors)})"
