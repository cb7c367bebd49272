"""The speed pages (docs/speed/*.md, docs/benchmarks.md) are generated from the records under
docs/bench/: rendering the committed records reproduces every committed page byte for byte, so a page
edited by hand (or a record changed without rendering) fails here. Run ``python -m bench.docs_pages``."""
import json
import re

import pytest

from bench.docs_pages import render
from conftest import ROOT


def test_rendering_the_records_reproduces_every_page():
    for path, text in render.rendered().items():
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing: run python -m bench.docs_pages"
        assert path.read_text() == text, (f"{path.relative_to(ROOT)} differs from its record under docs/bench/: "
                                          "edit the record, then run python -m bench.docs_pages")


def test_every_row_names_command_cpu_threads_date_and_commit():
    machines, pages = render.load_records()
    for name, record in pages.items():
        for row in record["rows"]:
            for field in ("command", "threads", "date", "commit"):
                assert str(row[field]).strip(), (name, row)
            assert machines[row["machine"]]["cpu"] and machines[row["machine"]]["isa"], (name, row)
            assert re.fullmatch(r"\d{4}-\d\d-\d\d", row["date"]) or row["date"] == "not recorded", (name, row)


def test_pages_are_short_and_no_heading_names_a_pass():
    pages = {path: text for path, text in render.rendered().items()
             if path.parent == render.PAGES or path == render.OVERVIEW}
    assert len(pages) == len(render.ORDER) + 1, sorted(pages)
    for path, text in pages.items():
        assert len(text.splitlines()) <= 150, path
        headings = [line for line in text.splitlines() if line.startswith("#")]
        assert not [h for h in headings if re.search(r"\bpass\b", h, re.I)], (path, headings)


def test_a_row_without_its_commit_is_one_clear_error(tmp_path):
    for source in (ROOT / "docs" / "bench").glob("*.json"):
        (tmp_path / source.name).write_text(source.read_text())
    record = json.loads((tmp_path / "packed.json").read_text())
    record["rows"][0]["commit"] = ""
    (tmp_path / "packed.json").write_text(json.dumps(record))
    with pytest.raises(render.RecordError, match=r"packed.json, row 1: every row names commit"):
        render.rendered(tmp_path)


def test_a_hand_edited_page_is_reported_by_check(tmp_path, monkeypatch, capsys):
    page = tmp_path / "speed" / "packed.md"
    page.parent.mkdir()
    pages = render.rendered()
    page.write_text(pages[render.PAGES / "packed.md"].replace("1.73x", "1.80x"))
    monkeypatch.setattr(render, "PAGES", page.parent)
    monkeypatch.setattr(render, "OVERVIEW", tmp_path / "benchmarks.md")
    assert render.main(["--check"]) == 1
    assert "speed/packed.md differs from its record" in capsys.readouterr().out


def test_readme_is_a_short_front_door():
    """README.md: at most 250 lines, the two set-up commands first, then the generated task results."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    assert lines[4].startswith("python -m venv .venv") and "train.py task=lm" in lines[4], lines[:8]
    assert lines[7].startswith("python -m venv .venv") and "pytest -q tests" in lines[7], lines[:8]
    assert render.TASK_TABLE_BEGIN in lines, "README.md lost the generated task results table"
