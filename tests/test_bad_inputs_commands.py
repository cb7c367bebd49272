"""The bad-input table's mapping on real commands (issue 44's six rows and a few rough edges): ``python
train.py`` prints the row's message as its last stderr line ``[train] error: ...``, exits 1, shows no
traceback, and leaves no run or sweep directory behind."""
from __future__ import annotations

import json

import pytest
from test_reliability_processes import assert_one_error_line, lm_cli_args, train_cli

pytestmark = pytest.mark.slow


def _left(tmp_path) -> list:
    outputs = tmp_path / "outputs"
    return sorted(str(p) for kind in ("runs", "multirun") for p in (outputs / kind).glob("*/*"))


def _many_characters(tmp_path):
    letters = [chr(c) for c in range(0x3b1, 0x3c9)] + [chr(c) for c in range(0x430, 0x44f)] + list("abcdefghij")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"de": " ".join(letters[i:]), "en": " ".join(letters[:i + 1])}) + "\n"
                             for i in range(len(letters))))
    return [f"task.data.files.{split}={pairs}" for split in ("train", "valid", "test")]


@pytest.mark.parametrize("args,expected", [
    (["model=srupp", "model.proj_size=64", "model.num_heads=3"],
     "[train] error: model.proj_size=64 must be divisible by model.num_heads=3"),
    (["task=translation", "task.data.source=files", "task.subwords.vocab_size=300", "trainer.device=cpu"],
     "[train] error: task.subwords.vocab_size=300 is too small for this corpus"),
    (["-m", "hparams_search=lm_optuna", "hydra.sweeper.storage=foo://x"],
     "[train] error: hydra.sweeper.storage=foo://x: 'foo' is not a database SQLAlchemy knows"),
    (["trainer.optimizer.lr=0"], "[train] error: trainer.optimizer.lr=0: no step would change a weight"),
    (["--config-dir", "{tmp}"], "[train] error: --config-dir {tmp} holds a config.yaml, which Hydra ignores"),
    (["task.data.train_file={tmp}"], "[train] error: LM data file {tmp} is a directory, not a file."),
], ids=["srupp-heads", "subwords-minimum", "sweep-storage", "lr-0", "config-dir-config-yaml", "data-directory"])
def test_a_bad_input_ends_the_command_in_its_one_line_and_leaves_no_dir(args, expected, tmp_path):
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    args = [a.format(tmp=tmp_path) for a in args]
    if "task=translation" in args:
        args += _many_characters(tmp_path)
    elif "-m" not in args and "--config-dir" not in args:
        args = [a for a in lm_cli_args(4) if not a.startswith("task.data.train_file=")
                or not any(b.startswith("task.data.train_file=") for b in args)] + args
    proc = train_cli(tmp_path, args)
    line = assert_one_error_line(proc)
    assert line.startswith(expected.format(tmp=tmp_path)), line
    assert _left(tmp_path) == []
