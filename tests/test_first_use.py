"""First-use rough edges (issue 28), in-process: the real pipeline (tasks.engine.train.runner.run) on the tiny LM
fixture, the real config tree, the real sru modules. The rows about a process (signals, exit lines,
run dirs, train.log, read-only / full disks) are in tests/test_reliability_processes.py.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import torch
from conftest import LM_FIXTURE, ROOT, compose, tiny_lm_overrides
from omegaconf import OmegaConf

import sru
from tasks.engine.errors import DataError, ResumeError, override, resume_command
from tasks.engine.run_metrics import json_safe


# ---- debug=smoke keeps the chosen logger; classification's smoke vectors are the tiny set ---------------
@pytest.mark.parametrize("logger", ["tensorboard", "wandb", "csv", "none"])
def test_smoke_keeps_the_chosen_logger(logger):
    cfg = compose(["task=lm", "debug=smoke", f"logger={logger}"])
    assert cfg.logger.name == logger and cfg.trainer.max_steps == 5  # smoke only shortens the run


def test_smoke_classification_uses_the_tiny_vectors_unless_a_path_is_given():
    from tasks.common.word2vec import OFFLINE_NAME, TINY_NAME, TINY_SETTINGS

    assert compose(["task=classification"]).task.embedding.path == OFFLINE_NAME
    assert compose(["task=classification", "debug=smoke"]).task.embedding.path == TINY_NAME
    assert compose(["task=classification", "debug=smoke", "task.embedding.path=null"]).task.embedding.path is None
    assert TINY_SETTINGS.corpora == ("ptb",) and TINY_SETTINGS.epochs == 1 and TINY_SETTINGS.dim == 300


# ---- text data files are checked to be text ------------------------------------------------------------
def _lm_with_train_file(path):
    return [o for o in tiny_lm_overrides("sru", steps=2) if not o.startswith("task.data.train_file=")] + \
        [f"task.data.train_file={path}"]


@pytest.mark.parametrize("kind", ["elf", "urandom", "utf16", "control"])
def test_a_binary_lm_data_file_is_refused_naming_file_and_key(kind, tmp_path, run_train):
    data = {"elf": Path(sys.executable).resolve().read_bytes()[:200_000], "urandom": os.urandom(100_000),
            "utf16": "the cat sat on the mat\n".encode("utf-16") * 100,
            "control": bytes(range(1, 9)) * 1000}[kind]
    bad = tmp_path / f"{kind}.txt"
    bad.write_bytes(data)
    with pytest.raises(DataError) as err:
        run_train(_lm_with_train_file(bad), tmp_path / "run")
    assert str(bad) in str(err.value) and "task.data.train_file" in str(err.value)
    assert "text" in str(err.value)


def test_real_text_with_a_few_odd_bytes_still_loads(tmp_path):
    from tasks.lm.data import read_text

    text = (LM_FIXTURE / "train.txt").read_text()
    odd = tmp_path / "odd.txt"
    odd.write_bytes(text.encode() + b"\n caf\xe9 \n")  # one Latin-1 byte past the checked sample's end is fine
    assert read_text(str(odd)).startswith(text[:100])


def test_a_binary_classification_file_is_refused(tmp_path):
    from tasks.classification.sources import read_table

    bad = tmp_path / "train.csv"
    bad.write_bytes(os.urandom(10_000))
    with pytest.raises(DataError, match=re.escape(str(bad))):
        read_table(bad)


# ---- resume: another optimizer, limits below the checkpoint ----------------------------------------------
@pytest.mark.slow
def test_resume_with_another_optimizer_starts_its_state_fresh_with_a_notice(run_train, tmp_path, capsys):
    run_train(tiny_lm_overrides("sru", steps=4), tmp_path)  # Adam
    resumed = tiny_lm_overrides("sru", steps=8) + ["trainer.optimizer.name=sgd", "trainer.optimizer.momentum=0.9",
                                                   f"resume={tmp_path}"]
    summary = run_train(resumed, tmp_path)
    assert summary["steps"] == 8
    out = capsys.readouterr().out
    assert "trainer.optimizer.name=sgd differs from the checkpoint's adam: sgd starts with a fresh state" in out
    saved = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert saved["optimizer"]["param_groups"][0]["momentum"] == 0.9
    assert all("momentum_buffer" in s for s in saved["optimizer"]["state"].values())  # SGD's own state now


@pytest.mark.slow
def test_resume_with_the_same_optimizer_applies_its_new_hyperparameters(run_train, tmp_path):
    run_train(tiny_lm_overrides("sru", steps=4), tmp_path)
    run_train(tiny_lm_overrides("sru", steps=6) + ["trainer.optimizer.weight_decay=0.01", f"resume={tmp_path}"],
              tmp_path)
    saved = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert saved["optimizer"]["param_groups"][0]["weight_decay"] == 0.01
    assert all("exp_avg" in s for s in saved["optimizer"]["state"].values())  # Adam's moments carried over


@pytest.mark.slow
def test_resume_below_the_checkpoint_is_refused_in_one_line(run_train, tmp_path):
    limit = "trainer.max_steps=3"
    run_train(tiny_lm_overrides("sru", steps=8), tmp_path)
    with pytest.raises(ResumeError) as err:
        run_train(tiny_lm_overrides("sru", steps=8) + [limit, f"resume={tmp_path}"], tmp_path)
    message = str(err.value)
    assert "\n" not in message and f"{limit} is below the checkpoint's" in message
    assert torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["step"] == 8  # untouched


# ---- no NaN in JSON --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_three_step_run_writes_valid_json_and_shows_n_a(run_train, tmp_path, capsys):
    run_train(tiny_lm_overrides("sru", steps=3), tmp_path)

    def no_constants(name):
        raise AssertionError(f"{name} in results.json: not JSON")

    summary = json.loads((tmp_path / "results.json").read_text(), parse_constant=no_constants)
    assert summary["train_items_per_s"] is None and summary["train_items_per_cpu_s"] is None
    assert "train throughput n/a tokens/s (n/a tokens per CPU-second)" in capsys.readouterr().out
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=no_constants)


def test_json_safe_replaces_every_non_finite_number():
    assert json_safe({"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": -float("inf"), "e": 2}}) == \
        {"a": None, "b": [1.0, None], "c": {"d": None, "e": 2}}


# ---- sru: empty inputs keep autograd; a bad backend fails at construction --------------------------------
@pytest.mark.parametrize("shape", [(0, 3, 6), (5, 0, 6)])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_empty_inputs_keep_autograd_like_lstm(shape, bidirectional):
    x = torch.randn(*shape, requires_grad=True)
    width = 8 if bidirectional else 4
    if shape[1] == 0:  # nn.LSTM takes an empty batch (not an empty sequence): its outputs require grad
        assert torch.nn.LSTM(6, 4, bidirectional=bidirectional)(x)[0].requires_grad
    for module in (sru.SRU(6, 4, num_layers=2, bidirectional=bidirectional), sru.SRUCell(6, 4, bidirectional=bidirectional)):
        h, c = module(x)
        assert h.requires_grad and c.requires_grad and h.shape == (*shape[:2], width)
        (h.sum() + c.sum()).backward()
        assert torch.equal(x.grad, torch.zeros_like(x))
        assert all(p.grad is not None and not p.grad.any() for p in module.parameters())
        x.grad = None
    with torch.no_grad():
        h, c = sru.SRU(6, 4)(x)
    assert not h.requires_grad and not c.requires_grad


def test_a_bad_backend_name_fails_at_construction():
    with pytest.raises(ValueError, match=r"backend in \('auto', 'reference', 'cpu', 'triton'\), got 'gpu'"):
        sru.SRU(10, 8, backend="gpu")
    cell = sru.SRUCell(10, 8)
    with pytest.raises(ValueError, match="got 'cuda'"):
        cell.backend = "cuda"
    assert sru.SRU(10, 8, backend="reference").backend == "reference"


# ---- printed commands are shell- and Hydra-quoted --------------------------------------------------------
@pytest.mark.parametrize("path", ["outputs/runs/2026-12-01/10-00-00_1-ab", "/data/my runs/2026-12-01/x",
                                  "/tmp/it's here", "/tmp/a\"b$HOME`x`!", "/tmp/x,y=z [1]", "C:\\runs\\",
                                  "/tmp/${not_an_interpolation}"])
def test_printed_resume_commands_paste_back_to_the_same_path(path):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    command = resume_command(path)
    argv = shlex.split(command)  # what the shell hands train.py
    assert argv[:2] == ["python", "train.py"] and len(argv) == 3
    parsed = OverridesParser.create().parse_overrides(argv[2:])[0]
    assert parsed.key_or_group == "resume"
    assert OmegaConf.create({"v": parsed.value()}).v == path  # what Hydra and OmegaConf make of it
    assert override("resume", "runs/x") == "resume=runs/x"  # plain paths stay plain


# ---- every dotted key a README documents works as written ------------------------------------------------
DOCS = [ROOT / "README.md", *sorted(ROOT.glob("tasks/*/README.md"))]
_KEY = re.compile(r"^(task|model|trainer|logger|paths)(\.[a-z_0-9{},]+)+$")
_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)


def _is_group(token: str) -> bool:
    name = token.split("=", 1)[0]
    return "=" in token and "." not in name and ((ROOT / "conf" / name).is_dir() or name.startswith("hydra/"))


def _expand(key: str):
    """``task.data.files.{train,valid}`` -> the keys it names."""
    parts, keys = re.split(r"\{([^}]*)\}", key), [""]
    for i, part in enumerate(parts):
        keys = [k + alt for k in keys for alt in (part.split(",") if i % 2 else [part])]
    return keys


def documented_keys():
    """(doc, config groups of its command, token) for every ``task.``/``model.``/... key in a README's code
    (``+key=`` appends excluded).
    A command's groups (task=, experiment=, logger=, hydra/launcher= ...) are the context of its keys and of
    the inline mentions after it; a task README's default task is its own."""
    found = []
    for doc in DOCS:
        own_task = doc.parent.name if doc.parent.parent.name == "tasks" else None
        previous: list = []
        for match in _CODE.finditer(doc.read_text()):
            for line in match.group(0).strip("`").replace("\\\n", " ").splitlines():
                line = line.split("  #")[0].split(" # ")[0]
                try:
                    tokens = shlex.split(line)
                except ValueError:
                    tokens = line.split()
                groups = ([t for t in tokens if _is_group(t)] if "train.py" in tokens else []) or previous
                previous = groups
                if own_task and not any(g.startswith("task=") for g in groups):
                    groups = [f"task={own_task}"] + groups
                for token in tokens:
                    key = token.split("=", 1)[0]  # (a `+key=` append is Hydra's, e.g. the README's refused typo)
                    if not _KEY.match(key) or key.rsplit(".", 1)[-1] in ("py", "md", "yaml", "json", "pt"):
                        continue
                    if key.startswith("task.") and not any(g.startswith(("task=", "experiment=")) for g in groups):
                        continue  # a task key outside any task's context
                    found.append((doc.relative_to(ROOT), tuple(groups), token))
    return found


def _documented_overrides():
    """(doc, groups, token) of every documented ``key=value`` without a placeholder (<lower>, ..., a|b)."""
    return [(doc, groups, token) for doc, groups, token in documented_keys()
            if "=" in token and not ("<" in token or "..." in token or "|" in token or "{" in token.split("=")[0])]


def test_every_documented_key_exists_and_every_documented_override_applies():
    """Fast: each key is in the composed config, each override parses (Hydra's grammar) and sets its key
    in struct mode (as Hydra's would; a real compose of each is the slow test below)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    composed = functools.lru_cache(maxsize=None)(lambda groups: compose(list(groups)))
    found, problems = documented_keys(), []
    assert len(found) > 50  # the READMEs document many; an extraction that finds none would pass vacuously
    for doc, groups, token in found:
        for k in _expand(token.split("=", 1)[0]):
            if OmegaConf.select(composed(groups), k, default="<absent>") == "<absent>":
                problems.append(f"{doc}: {k} is not a key of {' '.join(groups) or 'the default config'}")
    for doc, groups, token in _documented_overrides():
        try:
            parsed = OverridesParser.create().parse_overrides([token])[0]
            cfg = OmegaConf.create(OmegaConf.to_container(composed(groups)))
            OmegaConf.set_struct(cfg, True)
            OmegaConf.update(cfg, parsed.key_or_group, parsed.value(), merge=True)
        except Exception as err:  # noqa: BLE001 - every failure is reported below
            problems.append(f"{doc}: {' '.join(groups)} {token}: {str(err).splitlines()[0]}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_documented_override_composes_with_hydra():
    problems = []
    for doc, groups, token in _documented_overrides():
        try:
            compose([*groups, token])
        except Exception as err:  # noqa: BLE001 - every failure is reported below
            problems.append(f"{doc}: {' '.join(groups)} {token}: {str(err).splitlines()[0]}")
    assert not problems, "\n".join(problems)


def test_the_translation_and_classification_file_overrides_work_as_written():
    for task, name in (("translation", "a.jsonl"), ("classification", "a.csv")):
        cfg = compose([f"task={task}", "task.data.source=files", f"task.data.files.train={name}",
                       f"task.data.files.test={name}"])
        assert dict(cfg.task.data.files) == {"train": name, "valid": None, "test": name}


# ---- word2vec: quiet training with one progress bar --------------------------------------------------------
@pytest.mark.slow
def test_word2vec_training_shows_one_bar_and_no_gensim_info_lines(tmp_path, capfd):
    pytest.importorskip("gensim")
    from tasks.common.word2vec import Word2VecSettings, corpus_sentences, train_word2vec

    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)  # as Hydra configures it: INFO records reach the console
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        settings = Word2VecSettings(dim=8, window=2, min_count=50, epochs=3, corpora=("ptb",))
        train_word2vec(corpus_sentences(("ptb",))[:3000], tmp_path / "v.bin", settings, workers=1)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    err = capfd.readouterr().err
    assert "gensim" not in err and "INFO" not in err
    assert err.count("[word2vec] training") >= 1 and "3/3" in err
    assert (tmp_path / "v.bin").is_file()
