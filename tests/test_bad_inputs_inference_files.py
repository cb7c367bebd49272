"""evaluate.py's ``file=`` (any file, scored by name, for every task) and the model-file checks, as rows of
the inference bad-input table (tests/test_bad_inputs_inference.py's helpers and its untrained tiny LM), plus
untrained tiny classification, translation and SQuAD models whose training files are gone.

Each row: exit status 2, one ``[<command>] error: ...`` line, no traceback, every file in the row's folder
byte-identical after, nothing written. docs/failures.md lists every row (its "Data files and model files"
table).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from conftest import ROOT, compose
from omegaconf import OmegaConf
from test_bad_inputs_inference import Row, fingerprint, made, run_command, tmp  # noqa: F401
from test_classification_e2e import tiny_classification_overrides
from test_speech_e2e import manifests as speech_clips  # noqa: F401 (a fixture)
from test_squad_e2e import tiny_squad_overrides
from test_translation_e2e import tiny_translation_overrides

from tasks.engine.base import build_task
from tasks.engine.inference.loader import write_model_file
from tasks.translation.data import SAMPLE_PAIRS

REVIEWS = ROOT / "tests" / "fixtures" / "classification" / "reviews.csv"


def _model_file(overrides, path: Path) -> None:
    """An untrained model file, built as training builds it (the task's data set up, the model built)."""
    cfg = compose(overrides)
    task = build_task(cfg)
    task.setup()
    write_model_file(path, task, OmegaConf.to_container(cfg, resolve=True), task.build_model().state_dict(), 0)


def _without(overrides, prefix):
    return [o for o in overrides if not o.startswith(prefix)]


@pytest.fixture(scope="module")
def others(tmp_path_factory):
    """cls.pt, tr.pt: trained on a file deleted since (scoring must not need it); sq.pt: a SQuAD reader."""
    root = tmp_path_factory.mktemp("others")
    train = root / "train.csv"
    shutil.copy(REVIEWS, train)
    _model_file(_without(tiny_classification_overrides("sru"), "task.data.files.") +
                [f"task.data.files.train={train}"], root / "cls.pt")
    pairs = root / "pairs.jsonl"
    shutil.copy(SAMPLE_PAIRS, pairs)
    _model_file(_without(tiny_translation_overrides("transformer", root / "cache"), "task.data.files.") +
                [f"task.data.files.{s}={pairs}" for s in ("train", "valid", "test")], root / "tr.pt")
    _model_file(tiny_squad_overrides("sru") + ["task.tagger=null"], root / "sq.pt")
    train.unlink()
    pairs.unlink()
    return root


@pytest.fixture
def folder(tmp, others):
    for name in ("cls.pt", "tr.pt", "sq.pt"):
        shutil.copy(others / name, tmp / name)
    return tmp


def _prepare(tmp: Path) -> None:
    saved = torch.load(tmp / "m.pt", weights_only=True)
    first = next(iter(saved["model"]))
    for name, value in (("nan.pt", float("nan")), ("inf.pt", float("inf"))):
        weights = {k: v.clone() for k, v in saved["model"].items()}
        weights[first].view(-1)[3] = value
        torch.save({**saved, "model": weights}, tmp / name)
    best = torch.load(tmp / "run" / "checkpoints" / "best.pt", weights_only=True)
    best["model"] = {k: v.clone() for k, v in best["model"].items()}
    best["model"][first].view(-1)[0] = float("nan")
    torch.save(best, tmp / "run" / "checkpoints" / "best.pt")  # newer than model.pt: the one a run dir loads
    torch.save({**saved, "task": "classification"}, tmp / "other_task.pt")
    torch.save({**saved, "task": "nosuchtask"}, tmp / "no_task.pt")
    os.mkfifo(tmp / "fifo")
    (tmp / "binary.txt").write_bytes(b"the cat\nthe\x00dog\n")
    (tmp / "labels.csv").write_text("text,label\ngood film,great\n")
    (tmp / "pairs.csv").write_text("en,de\nhello,hallo\n")
    (tmp / "array.jsonl").write_text('["hello", "hallo"]\n')
    (tmp / "lines.jsonl").write_text('{"id": "q", "context": "c", "question": "q?"}\n{"id": "r"}\n')
    (tmp / "empty_squad.json").write_text('{"version": "1.1", "data": []}')


ROWS = [
    Row("model-file-nan-weight", "predict", ["run=nan.pt"],
        "nan.pt: weight embed.weight holds 1 NaN or infinite value(s) of 1568; every output would be NaN"),
    Row("model-file-inf-weight", "evaluate", ["run=inf.pt"],
        "inf.pt: weight embed.weight holds 1 NaN or infinite value(s)"),
    Row("checkpoint-nan-weight", "evaluate", ["run=run"],
        "run/checkpoints/best.pt: weight embed.weight holds 1 NaN or infinite value(s)"),
    Row("model-file-task-of-another-task", "predict", ["run=other_task.pt"],
        "other_task.pt: its task field says task=classification but its saved config was trained as task=lm"),
    Row("model-file-task-of-no-task", "evaluate", ["run=no_task.pt"],
        "no_task.pt: its task field is 'nosuchtask', which names no task of this code"),
    Row("run-a-character-device", "predict", ["run=/dev/null"],
        "run=/dev/null: a character device, not a model file or run directory"),
    Row("run-a-fifo", "evaluate", ["run=fifo"], "run=fifo: a named pipe (FIFO), not a model file or run directory"),
    Row("file-empty", "evaluate", ["run=m.pt", "file="], "file=: expected a data file in the task's format"),
    Row("file-and-the-same-override", "evaluate", ["run=m.pt", "file=in.txt", "task.data.test_file=in.txt"],
        "file=in.txt and task.data.test_file=in.txt both name the test file; give one of the two"),
    Row("file-missing", "evaluate", ["run=m.pt", "file=nope.txt"], "{tmp}/nope.txt"),
    Row("file-binary-for-an-lm", "evaluate", ["run=m.pt", "file=binary.txt"],
        "binary.txt (task.data.test_file) is not a text file"),
    Row("file-classification-txt", "evaluate", ["run=cls.pt", "file=in.txt"],
        "in.txt: unsupported file type '.txt'; expected .csv, .tsv or .jsonl"),
    Row("file-classification-unknown-label", "evaluate", ["run=cls.pt", "file=labels.csv"],
        "labels.csv row 2: unknown label 'great'; expected one of ['neg', 'pos']"),
    Row("file-translation-csv", "evaluate", ["run=tr.pt", "file=pairs.csv"],
        "pairs.csv: a .csv file; expected .jsonl (one JSON object a line with keys ['en', 'de']), .tsv"),
    Row("file-translation-not-objects", "evaluate", ["run=tr.pt", "file=array.jsonl"],
        'array.jsonl line 1: a JSON list; expected one object a line, e.g. {{"en": ..., "de": ...}}'),
    Row("file-squad-json-lines", "evaluate", ["run=sq.pt", "file=lines.jsonl"],
        "lines.jsonl: not valid JSON (Extra data: line 2 column 1 (char 46)); expected a SQuAD v1.1 file"),
    Row("file-squad-without-questions", "evaluate", ["run=sq.pt", "file=empty_squad.json"],
        "file=empty_squad.json: no examples in it to score; give a file with at least one"),
    Row("predict-squad-document-without-questions", "predict", ["run=sq.pt", "input=empty_squad.json"],
        "input=empty_squad.json: a task=squad document with no inputs in it (nothing to predict)"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_a_bad_file_is_one_line_status_2_and_changes_no_file(row, folder, capfd, monkeypatch):
    _prepare(folder)
    before = fingerprint(folder)
    status, out, err = run_command(row.command, row.argv, capfd, monkeypatch=monkeypatch)
    lines = [x for x in err.splitlines() if x.strip()]
    assert status == 2, (status, err)
    assert "Traceback" not in err and len([x for x in lines if "error" in x]) == 1, err
    assert lines[-1].startswith(f"[{row.command}] error: ") and row.message.format(tmp=folder) in lines[-1], \
        lines[-1]
    # a data file is read once the model is loaded: the progress lines before it (stdout) and nothing else
    assert fingerprint(folder) == before and all(x.startswith("[") for x in out.splitlines())
    assert len(out.splitlines()) + len(lines) <= 6 and " error" not in out and "metrics" not in out, (out, err)
    assert not (folder / "outputs").exists()


def test_docs_failures_lists_every_row():
    docs = (ROOT / "docs" / "failures.md").read_text()
    missing = [r.id for r in ROWS if f"`{r.id}`" not in docs]
    assert not missing, f"add these rows to docs/failures.md: {missing}"


# ---- what is scored --------------------------------------------------------------------------------------

@pytest.mark.parametrize("model,data,written,count", [
    ("cls.pt", REVIEWS, "predictions_test.jsonl", 24),
    ("tr.pt", SAMPLE_PAIRS, "hyp_test.txt", 8),
], ids=["classification", "translation"])
def test_file_scores_exactly_that_file_with_no_training_file(model, data, written, count, folder, capfd):
    status, _, err = run_command("evaluate", [f"run={model}", f"file={data}", "out_dir=ev", "output=m.json"], capfd)
    assert status == 0, err
    assert len((folder / "ev" / written).read_text().splitlines()) == count  # every row of it, nothing carved
    assert 0.0 <= json.loads((folder / "m.json").read_text())["unk_share"] <= 1.0


def test_the_source_and_file_overrides_score_the_file_too(folder, capfd):
    status, _, err = run_command("evaluate", ["run=cls.pt", "task.data.source=files",
                                              f"task.data.files.test={REVIEWS}", "out_dir=ev"], capfd)
    assert status == 0 and len((folder / "ev" / "predictions_test.jsonl").read_text().splitlines()) == 24, err


def test_text_of_unknown_words_is_scored_with_a_warning(folder, capfd):
    (folder / "other.txt").write_text("zebra quantum violet harbour " * 40 + "\n")
    status, out, _ = run_command("evaluate", ["run=m.pt", "file=other.txt", "out_dir=ev", "output=m.json"], capfd)
    share = json.loads((folder / "m.json").read_text())["unk_share"]
    assert status == 0 and share > 0.9, out
    warnings = [line for line in out.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "of the test tokens are unknown to the model's vocabulary" in warnings[0]
    assert f"unk_share {share:.4f}" in out.strip().splitlines()[-2]  # in the result line, before "metrics:"
    status, out, _ = run_command("evaluate", ["run=m.pt", "out_dir=ev2", "output=own.json"], capfd)
    assert status == 0 and "warning" not in out and json.loads((folder / "own.json").read_text())["unk_share"] < 0.05


def test_a_corpus_literal_unk_is_a_known_token(folder, capfd):
    """PTB writes its rare words as <unk> (about 6% of its test set): a token the model trained on, no warning."""
    (folder / "ptb_like.txt").write_text("the cat <unk> the cat\n" * 40)
    status, out, _ = run_command("evaluate", ["run=m.pt", "file=ptb_like.txt", "out_dir=ev", "output=m.json"], capfd)
    assert status == 0 and "warning" not in out and json.loads((folder / "m.json").read_text())["unk_share"] == 0.0


def test_a_run_directory_predicts_from_its_model_file(folder, capfd, monkeypatch):
    """best.pt without the inference state (as a speech run's lacks part of it): the newer model.pt is loaded,
    nothing rebuilt from the corpus; a best.pt newer than model.pt (a resumed run) is the one loaded."""
    best = folder / "run" / "checkpoints" / "best.pt"
    torch.save({**torch.load(best, weights_only=True), "task": {}}, best)
    os.utime(folder / "run" / "model.pt")  # written at the end of the run, after the last best.pt
    status, out, err = run_command("predict", ["run=run", "mode=score"], capfd, monkeypatch=monkeypatch)
    assert status == 0 and "[load]" not in err and out.strip()
    status, out, err = run_command("evaluate", ["run=run", "out_dir=ev"], capfd)
    assert status == 0 and "[evaluate] run/model.pt (task=lm" in out and "[load]" not in out + err, out
    os.utime(best, (os.path.getmtime(folder / "run" / "model.pt") + 10,) * 2)
    status, out, err = run_command("evaluate", ["run=run", "out_dir=ev2"], capfd)
    assert status == 0 and "[evaluate] run/checkpoints/best.pt" in out and "[load]" in out + err, out


def test_a_speech_manifest_line_that_is_not_an_object_is_named(tmp_path):
    from tasks.speech.data import read_manifest

    (tmp_path / "m.jsonl").write_text('{"audio": "a.wav", "duration": 1.0, "text": "a"}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"m.jsonl:2: a JSON list, not an object; a manifest line is one object"):
        read_manifest(tmp_path / "m.jsonl")


# read_manifest (evaluate.py file=<manifest> of a speech model, task.data.manifests.*): content -> the message
MANIFEST_ROWS = [
    ("manifest-tsv-without-header", "m.tsv", "a.wav\t1.0\tahoj\n",  # was "the manifest has no utterances"
     "m.tsv:1: ['a.wav', '1.0', 'ahoj'] is not a header naming the columns; a .tsv manifest starts with one, "
     "e.g. audio<TAB>duration<TAB>text (the audio column one of ['audio', 'audio_filepath', 'path'])"),
    ("manifest-empty-transcript", "m.jsonl", '{"audio": "a.wav", "duration": 1.0, "text": ""}\n',
     "m.jsonl:1: text is empty; every manifest line needs its transcript (an utterance with nothing to score "
     "has no place in a manifest: leave the line out)"),  # was "no transcript field"
    ("manifest-empty-audio", "m.tsv", "audio\tduration\ttext\n\t1.0\tahoj\n",
     "m.tsv:2: audio is empty; every manifest line needs its audio path (an utterance with nothing to score "
     "has no place in a manifest: leave the line out)"),
]


@pytest.mark.parametrize("row", MANIFEST_ROWS, ids=[r[0] for r in MANIFEST_ROWS])
def test_a_speech_manifest_error_says_what_is_wrong(row, tmp_path):
    from tasks.speech.data import read_manifest

    _, name, content, message = row
    (tmp_path / name).write_text(content)
    with pytest.raises(ValueError) as err:
        read_manifest(tmp_path / name)
    assert str(err.value) == f"{tmp_path}/{message}"


def test_docs_failures_lists_every_manifest_row():
    docs = (ROOT / "docs" / "failures.md").read_text()
    missing = [r[0] for r in MANIFEST_ROWS if f"`<dir>/{r[3]}`" not in docs]
    assert not missing, f"add these rows to docs/failures.md: {missing}"


def test_file_names_a_split_of_every_task():
    from tasks.engine.base import available_tasks, task_class

    for name in available_tasks():
        source, key = task_class(name).file_overrides("x.data", "test")
        assert source.startswith("task.data.source=") and key.endswith('="x.data"'), name


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("sox") is None,
                    reason="espeak-ng and sox synthesise the test clips (apt-get install -y espeak-ng sox)")
def test_a_speech_run_directory_reports_a_bad_line_without_rebuilding(speech_clips, run_train, tmp_path, capfd,
                                                                      monkeypatch):
    """Its checkpoints lack part of the inference state (the frequent word): run=<run dir> reads model.pt, so
    a bad input line is the one line there is, not the last of a corpus rebuild's."""
    from test_speech_e2e import speech_run_overrides

    run_dir = tmp_path / "run"
    run_train(speech_run_overrides(speech_clips, "sru", tmp_path / "cache",
                                   ["task.decoder=beam", "task.lm_order=3", "task.beam_size=3"]), run_dir)
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    before = fingerprint(run_dir)
    status, out, err = run_command("predict", [f"run={run_dir}"], capfd, stdin="missing.wav\n",
                                   monkeypatch=monkeypatch)
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("[run]")]
    assert status == 2 and "Traceback" not in err and fingerprint(run_dir) == before, err
    assert len(lines) == 2 and lines[0].startswith("[predict] error: stdin line 1: missing.wav"), err  # + summary


def test_a_voice_pack_speech_model_keeps_its_alphabet_when_scoring_a_manifest():
    """alphabet=null follows the source (cs+nl for the voice packs, en otherwise): file= switches the source to
    manifest, and the restored vocabulary keeps the trained alphabet (transcripts normalised as trained)."""
    trained = build_task(compose(["task=speech"]))
    state = {"vocab": trained.vocab.state_dict(), "frequent_word": "a", "chars_per_step": 1.0}
    scoring = build_task(compose(["task=speech", "task.data.source=manifest", "task.decoder=greedy"]))
    assert (trained.alphabet, scoring.alphabet) == ("cs+nl", "en")
    scoring.restore_inference_state({**state, "cmvn_mean": None, "cmvn_std": None})
    assert scoring.alphabet == "cs+nl"
