"""What an installed (non-checkout) user gets: the config tree as data files, the sru-train entry point,
and no module reaching back into train.py or editing sys.path."""
from __future__ import annotations

import subprocess

import pytest
from conftest import ROOT

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11



def test_every_config_folder_is_installed_as_data_files():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data_files = project["tool"]["setuptools"]["data-files"]
    listed = {pattern.rsplit("/", 1)[0] for patterns in data_files.values() for pattern in patterns}
    folders = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "conf").rglob("*.yaml")}
    assert folders <= listed, f"add these conf/ folders to [tool.setuptools.data-files]: {sorted(folders - listed)}"
    for target, patterns in data_files.items():
        assert all(target == "share/sru-experiments/" + pattern.rsplit("/", 1)[0] for pattern in patterns)
    assert project["project"]["scripts"]["sru-train"] == "tasks.engine.runner:cli"


def test_nothing_imports_train_or_edits_sys_path():
    found = subprocess.run(["git", "grep", "-n", "-E", r"^\s*(import train\b|from train import)", "--", "tasks",
                            "scripts", "sru"], cwd=ROOT, capture_output=True, text=True).stdout
    assert found == ""
    edits = subprocess.run(["git", "grep", "-n", "sys.path.insert\\|sys.path.append", "--", ".", ":!tests"],
                           cwd=ROOT, capture_output=True, text=True).stdout
    assert edits == "", f"only tests may edit sys.path:\n{edits}"
