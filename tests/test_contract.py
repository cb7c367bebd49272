"""The task contract end to end: sample-size normalisation makes the update independent of how a global
batch is cut into micro-batches and processes; records of every rank reach end_eval exactly once; a task's
predict options come from its own schema, and its output from two formatting hooks."""
from __future__ import annotations

import json

import pytest
import torch
from contract_worker import OVERRIDES, train_toy
from test_distributed import ROOT, torchrun
from toy_task import ToyTask

from tasks.engine.base import BadInput, Task
from tasks.engine.inference.options import OptionError, check_for_task
from tasks.engine.train.runner import compose


def _weights(summary):
    return {k: torch.tensor(v) for k, v in summary["weights"].items()}


def _assert_same(a, b):
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5, msg=f"parameter {k}")
    assert a["valid"]["loss"] == pytest.approx(b["valid"]["loss"], rel=1e-5)


@pytest.mark.slow
def test_accumulation_batch_size_and_processes_give_the_same_update(tmp_path):
    accumulated = train_toy(tmp_path / "acc4", accumulate=4, batch_size=2)
    big_batch = train_toy(tmp_path / "bs8", accumulate=1, batch_size=8)
    _assert_same(accumulated, big_batch)
    torchrun(2, str(ROOT / "tests" / "contract_worker.py"), str(tmp_path / "ddp"), "2", "2",
             env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    ddp = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    _assert_same(accumulated, ddp)
    # the comparison is not vacuous: 5 steps moved the weights far beyond the tolerance
    start = ToyTask(compose(OVERRIDES)).build_model().state_dict()
    moved = max(float((w - start[k].flatten()).abs().max()) for k, w in _weights(accumulated).items())
    assert moved > 1e-2


@pytest.mark.slow
def test_records_of_both_ranks_arrive_once_and_the_predictions_file_is_written(tmp_path):
    torchrun(2, str(ROOT / "tests" / "contract_worker.py"), str(tmp_path), "1", "2",
             env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    for split in ("valid", "test"):
        ids = json.loads((tmp_path / f"records_{split}.json").read_text())
        assert sorted(ids) == list(range(13))  # 13 examples in 4 batches over 2 ranks: each exactly once
        predictions = json.loads((tmp_path / f"predictions_{split}.json").read_text())
        assert len(predictions) == 13
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["valid"]["n_records"] == summary["test"]["n_records"] == 13.0


def test_predict_options_come_from_the_task_schema_checked_as_the_command_line_gives_them():
    task = ToyTask(compose(OVERRIDES))
    options = check_for_task(task, {"shift": "2"})  # text, as split from the command line
    assert (options.mode, options.shift) == ("tags", 2)  # the default, and the value given
    refused = [({"shift": "11"}, "shift=11: expected an integer from 0 to 10 (predict.py, task=toy, mode=tags)"),
               ({"shift": "x"}, "shift=x: expected an integer from 0 to 10"),
               ({"mode": "count", "shift": "1"}, "shift=1: applies only with mode=tags, and this run uses mode=count"),
               ({"mode": "all"}, "mode=all: expected tags or count (predict.py, task=toy)"),
               ({"max_tokens": "5"}, "max_tokens=5: an option of predict.py, task=lm, mode=generate, and this is a "
                                     "task=toy model (its options: ['mode', 'shift'])")]
    for given, message in refused:
        with pytest.raises(OptionError) as err:
            check_for_task(task, given)
        assert str(err.value).startswith(message), str(err.value)


def test_predict_output_goes_through_two_formatting_hooks():
    task = ToyTask(compose(OVERRIDES))
    model = task.build_model().eval()
    inputs = [task.parse_input("1 2 3"), task.parse_input("4")]
    tags = task.predict(model, inputs, check_for_task(task, {}), lambda n: None)
    counts = task.predict(model, inputs, check_for_task(task, {"mode": "count"}), lambda n: None)
    lines = [task.format_prediction(r) for r in (*tags, *counts, BadInput(5, "empty line"))]
    assert [len(x.split()) for x in lines[:2]] == [3, 1] and json.loads(lines[2]) == {"tokens": 3}
    assert json.loads(lines[4]) == {"line": 5, "error": "empty line"}  # a bad line keeps its place
    assert task.format_output(lines, tags + counts) == "".join(line + "\n" for line in lines)
    assert sorted(name for name in vars(Task) if name.startswith("format_")) == ["format_output", "format_prediction"]
