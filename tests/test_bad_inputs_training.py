"""Reliability v6 rows of the bad-input table: training as strict as evaluation, Hydra's composition errors,
and Optuna search spaces that no trial could run. Each row calls the check ``python train.py`` runs and
compares the whole one-line message (train.py prints it as ``[train] error: <message>``, status 1;
tests/test_bad_inputs_training_commands.py runs them as real commands). docs/failures.md lists every row
(its "Training and sweeps" table). ``{tmp}``: the row's temporary directory; ``{ram}`` / ``{need}``: this
machine's RAM and what the model asked for, in GB (``<N>`` / ``<M>`` in the docs)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List

import pytest
import torch
from omegaconf import OmegaConf
from conftest import ROOT, compose

from sru import SRU
from tasks.engine.config.cores import usable_cores
from tasks.engine.config.hydra_errors import check_composes
from tasks.engine.errors import RunError
from tasks.engine.train.runner import check_before_work, check_command_line
from tasks.engine.sweeps.space_check import check_space_values
from tasks.engine.sweeps.study import search_space
from tasks.engine.training.model_size import memory_budget

RAM_GB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)


@dataclass
class Case:
    id: str
    call: Callable[[Path], Any]
    message: str


def command_line(*overrides: str) -> Callable[[Path], Any]:
    """``python train.py <overrides>``'s checks on what the command line gave ({tmp} in a value: the row's dir)."""
    def call(tmp: Path):
        given = [o.format(tmp=tmp) for o in overrides]
        check_command_line(compose(given), given)
    return call


def space(*arguments: str) -> Callable[[Path], Any]:
    """An Optuna sweep's search space (``hparams_search=lm_optuna`` plus these arguments), checked before trial 1."""
    def call(tmp: Path):
        params = OmegaConf.load(ROOT / "conf" / "hparams_search" / "lm_optuna.yaml").hydra.sweeper.params
        found, fixed = search_space(params, list(arguments))
        check_space_values(found, compose(fixed), check_before_work)
    return call


def sru_of_width(width: int) -> Callable[[Path], Any]:
    def call(tmp: Path):
        optimizer = compose([]).trainer.optimizer  # adam: weights, gradients and two moments
        with memory_budget(torch.device("cpu"), optimizer):
            SRU(width, width, num_layers=2)
    return call


TRAINING = [
    Case("source-does-not-read-the-file", command_line("task.data.source=ptb", "task.data.train_file={tmp}/empty.txt"),
         "task.data.train_file={tmp}/empty.txt: read only with task.data.source=files, and this run's source is ptb: "
         "the default data would be trained on instead. Add task.data.source=files"),
    Case("top-level-typo", command_line("+sed=3"),
         "+sed=3: sed is not a top-level key of the config, and nothing reads it (did you mean seed?). Remove it or "
         "fix its spelling (the top-level keys: conf/config.yaml)"),
    Case("num_threads-over-the-cores", lambda tmp: check_before_work(compose(["trainer.num_threads=10000"])),
         "trainer.num_threads=10000 is more than the {cores} CPU cores this process may use; give at most "
         "trainer.num_threads={cores}, or null for the cores free at start"),
    Case("hidden_size-beyond-the-memory", sru_of_width(200000),
         "the model does not fit: training it needs more than {need} GB (weights, gradients and optimizer state), "
         "and this machine's RAM has {ram} GB; lower model.hidden_size / model.num_layers (or the vocabulary, e.g. "
         "task.data.max_vocab)"),
    Case("task-group-missing", lambda tmp: check_composes(["task=nosuchtask"]),
         "task=nosuchtask: no such config task/nosuchtask.yaml; the choices: classification, lm, lm_char, speech, "
         "squad, translation (conf/task/)"),
    Case("model-group-typo", lambda tmp: check_composes(["model=sruu"]),
         "model=sruu: no such config model/sruu.yaml (did you mean sru?); the choices: cnn, lstm, sru, srupp, "
         "transformer, transformer_lm, transformer_sru (conf/model/)"),
    Case("key-not-in-struct", lambda tmp: check_composes(["trainer.max_step=5"]),
         "trainer.max_step=5: max_step is not a key of trainer (did you mean trainer.max_steps?). Fix its spelling "
         "(+trainer.max_step=5 would add it as a new key)"),
    Case("sweep-key-not-in-struct", lambda tmp: check_composes(["-m", "model.hiden_size=8,16"]),
         "model.hiden_size=8: hiden_size is not a key of model (did you mean model.hidden_size?). Fix its spelling "
         "(+model.hiden_size=8 would add it as a new key)"),
    Case("append-an-existing-key", lambda tmp: check_composes(["+seed=3"]),
         "Could not append to config. An item is already at 'seed'. Either remove + prefix: 'seed=3' Or add a "
         "second + to add or override 'seed': '++seed=3'"),
    Case("delete-a-missing-key", lambda tmp: check_composes(["~nokey"]),
         "Could not delete from config. 'nokey' does not exist."),
    Case("override-syntax", lambda tmp: check_composes(["model.hidden_size=[1,2"]),
         "model.hidden_size=[1,2: no viable alternative at input '[1,2' (the override syntax: "
         "https://hydra.cc/docs/advanced/override_grammar/basic)"),
]

SWEEPS = [
    Case("space-reversed-bounds", space("model.dropout=interval(0.9,0.1)"),
         "search space model.dropout=interval(0.9,0.1): the lower bound 0.9 is above the upper bound 0.1; write "
         "interval(0.1, 0.9)"),
    Case("space-log-from-0", space("trainer.optimizer.lr=tag(log,interval(0,1e-2))"),
         "search space trainer.optimizer.lr=tag(log,interval(0,1e-2)): a log scale needs bounds > 0, received lower "
         "bound 0.0; use a small positive one, e.g. tag(log, interval(1e-05, 0.01))"),
    Case("space-outside-the-schema", space("model.dropout=interval(1.5,2.0)"),
         "search space model.dropout: a trial would draw 1.5, which the run refuses: model.dropout: expected a "
         "number in [0, 1), received 1.5"),
    Case("space-new-key-typo", space("+model.hiden_size=choice(8,16)"),
         "search space +model.hiden_size: a trial would draw 8, which the run refuses: model.hiden_size: not a key "
         "of model (did you mean model.hidden_size?). Remove it or fix its spelling (the accepted keys: "
         "conf/model/sru.yaml)"),
    Case("space-key-typo", space("model.hiden_size=choice(8,16)"),
         "search space model.hiden_size: not a key of the config (did you mean model.hidden_size?); fix its "
         "spelling, or write +model.hiden_size to add a new key"),
    Case("space-choice-not-a-number", space("model.hidden_size=choice(1,abc)"),
         "search space model.hidden_size: a trial would draw 'abc', which the run refuses: model.hidden_size: "
         "expected an integer >= 1, received 'abc'"),
    Case("space-empty-range", space("model.num_layers=range(3,3)"),
         "search space model.num_layers=range(3,3): holds no value; range(start, stop, step) needs start < stop "
         "and step >= 1"),
    Case("space-fixed-keys-fail", space("trainer.max_steps=abc"),
         "every trial of this sweep would fail: trainer.max_steps: expected an integer >= 1 or null, received 'abc'"),
]

CASES: List[Case] = TRAINING + SWEEPS


def expected(case: Case, tmp: Path, message: str) -> str:
    need = re.search(r"needs more than ([\d,.]+) GB", message)
    return case.message.format(tmp=tmp, cores=usable_cores(), ram=f"{RAM_GB:,.1f}",
                               need=need.group(1) if need else "?")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gives_its_one_line(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises((RunError, ValueError)) as err:
        case.call(tmp_path)
    message = str(err.value)
    assert "\n" not in message and message == expected(case, tmp_path, message)


def test_docs_failures_lists_every_row():
    docs = (ROOT / "docs" / "failures.md").read_text()
    shown = {c.id: c.message.format(tmp="<dir>", cores="<N>", ram="<N>", need="<M>") for c in CASES}
    missing = [i for i, text in shown.items() if text not in docs]
    assert not missing, f"add these rows to docs/failures.md's training and sweeps table: {missing}"
