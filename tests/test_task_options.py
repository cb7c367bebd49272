"""Tasks declare their own inference options; the engine knows no task (docs/architecture.md: the engine
knows tasks only through the contract and finds them by folder name).

- every file under tasks/engine/ names no task, in code, strings, comments or docstrings;
- every task option is declared once, in the task's schema, with a default and a help text, and the
  option it applies with (``when``) is one of its own; no task option is also a generic key of the engine;
- docs/inference.md's options table has a row for every task option, naming the tasks that declare it.
"""
from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest
from conftest import ROOT, compose

from tasks.engine.base import available_tasks, build_task, task_class
from tasks.engine.config.command_options import allowed_text
from tasks.engine.inference.options import OPTIONS, declarations, task_option_names, task_option_schemas

ROOT = Path(__file__).resolve().parents[1]
TASK_NAMES = sorted({*available_tasks(), *(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml"))})


def test_the_engine_names_no_task():
    word = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(TASK_NAMES) + r")(?![A-Za-z0-9_])", re.IGNORECASE)
    named = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sorted((ROOT / "tasks" / "engine").rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if word.search(line)]
    assert len(TASK_NAMES) >= 6 and not named, "the engine finds tasks by name; it names none:\n" + "\n".join(named)


@pytest.mark.parametrize("task", sorted(task_option_schemas()))
def test_every_task_option_has_a_default_help_and_a_known_mode(task):
    schema = task_class(task).predict_schema
    names = {f.name for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for field in dataclasses.fields(schema):
        assert field.default is not dataclasses.MISSING, f"{task}: {field.name} has no default"
        assert field.metadata.get("help"), f"{task}: {field.name} has no help"
        assert allowed_text(field, hints[field.name]) != "a text", f"{task}: {field.name} says nothing it allows"
        when = field.metadata.get("when")
        assert when is None or (when[0] in names and when[0] != field.name), f"{task}: {field.name} when={when}"
    schema().check(build_task(compose([f"task={task}"])).task_cfg)  # the defaults pass its rules across options


def test_no_task_option_is_a_generic_key_and_every_task_has_options():
    assert not set(task_option_names()) & set(OPTIONS)
    assert sorted(task_option_schemas()) == sorted(available_tasks())


def test_the_docs_table_lists_every_task_option_with_its_tasks():
    docs = (ROOT / "docs" / "inference.md").read_text()
    for name in task_option_names():
        command = "both" if name in task_option_names("evaluate") else "predict"  # declared evaluate=True
        row = next((line for line in docs.splitlines() if line.startswith(f"| `{name}` | {command} |")), None)
        assert row is not None, f"docs/inference.md#options: no row for {name}"
        for declaration in declarations(name):
            assert all(t in row for t in declaration.tasks), (name, declaration.tasks, row)


@pytest.mark.parametrize("word", ["beam_size=4", "lm_weight=0.3", "beam=4", "decoder=greedy"])
def test_a_predict_option_given_to_evaluate_names_the_config_key_route(word):
    """Was "not an option; expected one of [...]": evaluate.py decodes as the saved config says."""
    from tasks.engine.inference.options import EVALUATE, OptionError, command_options, split_arguments

    with pytest.raises(OptionError) as err:
        split_arguments([word, "run=m.pt"], command_options(EVALUATE))
    assert str(err.value) == (f"{word}: an option of predict.py; evaluate.py decodes as the saved config says: "
                              "override that config's task.* key instead (the run's .hydra/config.yaml lists them)")
    assert str(err.value).replace(word, "beam_size=4") in (ROOT / "docs" / "failures.md").read_text()


def test_a_misspelt_task_option_from_python_gets_the_close_match():
    from tasks.engine.inference.options import OptionError, parse_value

    with pytest.raises(OptionError, match=r"temprature: not an option \(did you mean temperature\?\)"):
        parse_value("temprature", "0.5")  # load_predictor(..., temprature=0.5)
    assert parse_value("temperature", "0.5") == 0.5 and parse_value("batch_size", 8) == 8
