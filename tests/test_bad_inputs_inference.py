"""evaluate.py and predict.py against every bad input of the issue-50 probe, as a table (the fast tier).

Each row runs the command's ``main`` in this process on a real model file and a real run directory (an
untrained tiny LM: built, not trained) and checks: exit status 2, one ``[<command>] error: ...`` line with
the row's message, no traceback, and every file of the run, the model and the input byte-identical after.
Option rows name a run that does not exist: their error comes first, so it is raised before any model file
is read. docs/failures.md lists every row (``test_docs_failures_lists_every_row``).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence

import numpy as np
import pytest
import torch
from conftest import compose, tiny_lm_overrides
from omegaconf import OmegaConf

from tasks.engine.errors import ConfigError
from tasks.engine.inference.evaluate_cmd import main as evaluate_main
from tasks.engine.inference.loader import write_model_file
from tasks.engine.inference.overrides import check_overrides
from tasks.engine.inference.predict_cmd import main as predict_main
from tasks.engine.base import build_task

MODEL_LINE = "the cat\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A run directory (model.pt, checkpoints/best.pt, results.json, metrics.jsonl) and a copy of its model
    file: an untrained tiny LM, built as training builds it."""
    root = tmp_path_factory.mktemp("made")
    cfg = compose(tiny_lm_overrides(steps=2))
    task = build_task(cfg)
    task.setup()
    model = task.build_model()
    config = OmegaConf.to_container(cfg, resolve=True)
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    write_model_file(run / "model.pt", task, config, weights, 0)
    torch.save({"config": config, "model": weights, "step": 0, "task": task.state_dict()},
               run / "checkpoints" / "best.pt")
    (run / "results.json").write_text(json.dumps({"test": {"ppl": 50.0}}))
    (run / "metrics.jsonl").write_text("{}\n")
    shutil.copy(run / "model.pt", root / "m.pt")
    return root


@pytest.fixture
def tmp(made, tmp_path, monkeypatch):
    """The row's folder: the run and the model file copied in, the working directory."""
    shutil.copytree(made / "run", tmp_path / "run")
    shutil.copy(made / "m.pt", tmp_path / "m.pt")
    (tmp_path / "in.txt").write_text(MODEL_LINE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fingerprint(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def run_command(command: str, argv: Sequence[str], capfd, stdin: str = MODEL_LINE, monkeypatch=None):
    import io
    import sys

    if monkeypatch is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "surrogateescape"))))
    main = evaluate_main if command == "evaluate" else predict_main
    with pytest.raises(SystemExit) as done:
        main(list(argv))
        raise SystemExit(0)  # evaluate's main returns on success
    out, err = capfd.readouterr()
    return done.value.code, out, err


@dataclass
class Row:
    id: str
    command: str
    argv: List[str]
    message: str


ROWS = [
    # item 1: the output rule, whichever way the run is named
    Row("predict-output-model-pt", "predict", ["run=run", "output=run/model.pt"],
        "output=run/model.pt: inside the run directory {tmp}/run, whose files (model.pt, checkpoints/, results.json, "
        "metrics, predictions) evaluate.py and predict.py never replace; write outside it"),
    Row("predict-output-best-pt", "predict", ["run=run/model.pt", "output=run/checkpoints/best.pt"],
        "output=run/checkpoints/best.pt: inside the run directory {tmp}/run, whose files"),
    Row("predict-output-the-model-file", "predict", ["run=m.pt", "output=m.pt"],
        "output=m.pt: the model file run= names; it would be replaced by the results. Write them to another file"),
    Row("predict-output-a-link-to-the-model", "predict", ["run=m.pt", "output=link.txt"],
        "output=link.txt: the model file run= names"),
    Row("predict-output-another-model-file", "predict", ["run=run", "output=other.pt"],
        "output=other.pt: an existing PyTorch model file, never replaced by results; write them to another file"),
    Row("evaluate-output-results-json", "evaluate", ["run=run", "output=run/results.json"],
        "output=run/results.json: inside the run directory {tmp}/run, whose files"),
    Row("evaluate-output-model-pt", "evaluate", ["run=run/model.pt", "output=run/model.pt"],
        "output=run/model.pt: the model file run= names"),
    Row("evaluate-out-dir-run-named-by-its-model", "evaluate", ["run=run/model.pt", "out_dir=run"],
        "out_dir=run: inside the run directory {tmp}/run, whose files"),
    Row("evaluate-out-dir-inside-the-run", "evaluate", ["run=run", "out_dir=run/eval"],
        "out_dir=run/eval: inside the run directory {tmp}/run, whose files"),
    Row("predict-output-the-input", "predict", ["run=m.pt", "input=in.txt", "output=in.txt"],
        "output=in.txt: the input file itself; its inputs would be lost. Write the results to another file"),
    Row("predict-output-missing-folder", "predict", ["run=m.pt", "output=nope/out.txt"],
        "output=nope/out.txt: the folder {tmp}/nope does not exist; create it first (mkdir -p {tmp}/nope)"),
    Row("evaluate-output-missing-folder", "evaluate", ["run=m.pt", "output=nope/m.json"],
        "output=nope/m.json: the folder {tmp}/nope does not exist"),
    Row("predict-output-a-folder", "predict", ["run=m.pt", "output=."],
        "output=.: a directory, not a file; name the file to write"),
    # item 2: every option checked before the model file is read (run= does not even exist here)
    Row("max-tokens-negative", "predict", ["run=none.pt", "max_tokens=-5"],
        "max_tokens=-5: expected an integer >= 1 (predict.py, task=lm, mode=generate)"),
    Row("temperature-negative", "predict", ["run=none.pt", "temperature=-1"],
        "temperature=-1: expected a finite number > 0 (predict.py, task=lm, mode=generate)"),
    Row("temperature-nan", "predict", ["run=none.pt", "temperature=nan"],
        "temperature=nan: expected a finite number > 0 (predict.py, task=lm, mode=generate)"),
    Row("decoder-nonsense", "predict", ["run=none.pt", "decoder=nonsense"],
        "decoder=nonsense: expected greedy or beam (predict.py, task=speech)"),
    Row("speech-language-unknown", "predict", ["run=none.pt", "language=de"],
        "language=de: expected auto, cs or nl (predict.py and evaluate.py, task=speech)"),
    Row("evaluate-speech-language-unknown", "evaluate", ["run=none.pt", "language=english"],
        "language=english: expected auto, cs or nl (predict.py and evaluate.py, task=speech)"),
    Row("beam-0", "predict", ["run=none.pt", "beam=0"],
        "beam=0: expected an integer from 1 to 128 (predict.py, task=translation)"),
    Row("nbest-0", "predict", ["run=none.pt", "nbest=0"],
        "nbest=0: expected an integer from 1 to beam (predict.py, task=translation)"),
    Row("top-k-negative", "predict", ["run=none.pt", "top_k=-3"],
        "top_k=-3: expected an integer >= 0 (0: no cut) (predict.py, task=lm, mode=generate)"),
    Row("lm-weight-negative", "predict", ["run=none.pt", "lm_weight=-5"],
        "lm_weight=-5: expected a finite number >= 0 (predict.py, task=speech, decoder=beam)"),
    Row("lm-weight-abc", "predict", ["run=none.pt", "lm_weight=abc"],
        "lm_weight=abc: expected a finite number >= 0 (predict.py, task=speech, decoder=beam)"),
    # reliability v6: the speech beam has an upper bound (its work grows with beam x labels)
    Row("speech-beam-size-over-the-limit", "predict", ["run=none.pt", "beam_size=1000"],
        "beam_size=1000: expected an integer from 1 to 128 (predict.py, task=speech, decoder=beam)"),
    Row("speech-beam-size-0", "predict", ["run=none.pt", "beam_size=0"],
        "beam_size=0: expected an integer from 1 to 128 (predict.py, task=speech, decoder=beam)"),
    Row("translation-beam-over-the-limit", "predict", ["run=none.pt", "beam=1000"],
        "beam=1000: expected an integer from 1 to 128 (predict.py, task=translation)"),
    Row("batch-size-0", "predict", ["run=none.pt", "batch_size=0"],
        "batch_size=0: expected an integer >= 1 (predict.py, task=classification/squad/translation)"),
    Row("batch-size-negative", "predict", ["run=none.pt", "batch_size=-1"],
        "batch_size=-1: expected an integer >= 1"),
    Row("device-gpu0-predict", "predict", ["run=none.pt", "device=gpu0"],
        "device=gpu0: expected a torch device: auto, cpu, cuda, cuda:N, mps (evaluate.py and predict.py)"),
    Row("device-gpu0-evaluate", "evaluate", ["run=none.pt", "device=gpu0"],
        "device=gpu0: expected a torch device: auto, cpu, cuda, cuda:N, mps (evaluate.py and predict.py)"),
    Row("split-unknown", "evaluate", ["run=none.pt", "split=dev"],
        "split=dev: expected train, valid or test (evaluate.py)"),
    Row("precision-unknown", "predict", ["run=none.pt", "precision=fp64"],
        "precision=fp64: expected fp32, bf16 or int8 (docs/inference.md#precision) (evaluate.py and predict.py)"),
    Row("compare-unknown", "evaluate", ["run=none.pt", "precision=int8", "compare=fp16"],
        "compare=fp16: expected fp32, bf16 or int8: a second precision reported beside (evaluate.py)"),
    Row("compare-the-run-precision", "evaluate", ["run=m.pt", "compare=fp32"],
        "compare=fp32: this evaluation already runs in the run's own trainer.precision=fp32; compare two "
        "precisions, e.g. precision=int8 compare=fp32"),
    Row("compare-the-same-precision", "evaluate", ["run=m.pt", "precision=int8", "compare=int8"],
        "compare=int8: this evaluation already runs in precision=int8; compare two precisions, e.g. "
        "precision=int8 compare=fp32"),
    Row("checkpoint-with-a-model-file", "predict", ["run=m.pt", "checkpoint=last"],
        "checkpoint=last: only with run=<run dir> (its checkpoints/); run=m.pt is a model file, which holds one "
        "set of weights"),
    Row("export-with-inputs", "predict", ["run=m.pt", "export=new.pt", "input=in.txt"],
        "export=new.pt: writes the model file and predicts nothing; given with input=, one of the two would be "
        "dropped. Run export= alone"),
    Row("input-and-positional-inputs", "predict", ["run=m.pt", "input=in.txt", "the", "cat"],
        "input=in.txt: given with inputs on the command line ('the' ...); pass the inputs one way, either "
        "input=<file> or as words"),
    Row("option-given-twice", "predict", ["run=m.pt", "mode=score", "mode=generate"],
        "mode= given twice (mode=score and mode=generate); give it once"),
    # item 2, once the saved config is read: the task and mode each option applies to
    Row("option-of-another-task", "predict", ["run=m.pt", "beam=4"],
        "beam=4: an option of predict.py, task=translation, and this is a task=lm model (its options: "
        "['max_tokens', 'mode', 'seed', 'temperature', 'top_k']); it would change nothing"),
    Row("option-of-another-mode", "predict", ["run=m.pt", "mode=score", "temperature=0.5"],
        "temperature=0.5: applies only with mode=generate, and this run uses mode=score; it would change nothing "
        "(pass mode=generate too)"),
    Row("batch-size-on-a-task-without-batches", "predict", ["run=m.pt", "batch_size=8"],
        "batch_size=8: an option of predict.py, task=classification/squad/translation, and this is a task=lm model"),
    # item 3: no silent substitution
    Row("level-of-a-word-model", "evaluate", ["run=m.pt", "task.data.level=char"],
        "task.data.level=char: changes what the trained model means (it was trained with task.data.level=word); a "
        "trained model is scored and used with its own value. Train a model for task.data.level=char instead"),
    Row("vocabulary-size-of-a-model", "predict", ["run=m.pt", "task.data.max_vocab=10"],
        "task.data.max_vocab=10: changes what the trained model means"),
    # item 7: a model file missing a key
    Row("model-file-without-format", "predict", ["run=no_format.pt"],
        "damaged model file: no `format` in no_format.pt; re-export with `predict.py run=<run dir> "
        "export=<new file>`"),
    Row("model-file-without-inference", "evaluate", ["run=no_inference.pt"],
        "damaged model file: no `inference` in no_inference.pt; re-export with `predict.py run=<run dir> "
        "export=<new file>`"),
    Row("model-file-without-config", "predict", ["run=no_config.pt"],
        "damaged model file: no `config` in no_config.pt"),
    Row("model-file-without-its-vocabulary", "predict", ["run=no_vocab.pt"],
        "damaged model file: no `inference.vocab` in no_vocab.pt"),
    # item 4: input hygiene
    Row("binary-input", "predict", ["run=m.pt", "input=binary.txt"],
        "input=binary.txt: binary data (a NUL byte on line 2), not text; give one input per line as UTF-8 text "
        "(audio: one file path per line)"),
]


def _prepare(tmp: Path) -> None:
    os.symlink(tmp / "m.pt", tmp / "link.txt")
    shutil.copy(tmp / "m.pt", tmp / "other.pt")
    (tmp / "binary.txt").write_bytes(b"the cat\nthe\x00dog\n")
    saved = torch.load(tmp / "m.pt", weights_only=True)
    for key, name in (("format", "no_format.pt"), ("inference", "no_inference.pt"), ("config", "no_config.pt")):
        torch.save({k: v for k, v in saved.items() if k != key}, tmp / name)
    torch.save({**saved, "inference": {}}, tmp / "no_vocab.pt")


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_a_bad_input_is_one_line_status_2_and_changes_no_file(row, tmp, capfd, monkeypatch):
    _prepare(tmp)
    before = fingerprint(tmp)
    status, out, err = run_command(row.command, row.argv, capfd, monkeypatch=monkeypatch)
    lines = [x for x in err.splitlines() if x.strip()]
    assert status == 2, (status, err)
    assert "Traceback" not in err and len([x for x in lines if "error" in x]) == 1, err
    assert lines[-1].startswith(f"[{row.command}] error: {row.message.format(tmp=tmp)}"), lines[-1]
    assert fingerprint(tmp) == before and out == ""
    assert not (tmp / "None").exists() and not (tmp / "outputs").exists()


def test_the_table_covers_the_probe():
    assert len(ROWS) >= 40 and len({r.id for r in ROWS}) == len(ROWS)


def test_docs_failures_lists_every_row():
    docs = (Path(__file__).parents[1] / "docs" / "failures.md").read_text()
    missing = [r.id for r in ROWS if r.message.split("{tmp}")[0].split(" (")[0] not in docs]
    assert not missing, f"add these rows to docs/failures.md: {missing}"


# ---- what is written, and how ----------------------------------------------------------------------------

def test_output_writes_through_a_symlink_a_fifo_and_a_device(tmp, capfd, monkeypatch):
    (tmp / "target.txt").write_text("old\n")
    os.symlink("target.txt", tmp / "link.txt")
    assert run_command("predict", ["run=m.pt", "output=link.txt"], capfd, monkeypatch=monkeypatch)[0] == 0
    assert (tmp / "link.txt").is_symlink() and (tmp / "target.txt").read_text() not in ("old\n", "")
    os.mkfifo(tmp / "fifo")
    got: List[bytes] = []
    reader = threading.Thread(target=lambda: got.append((tmp / "fifo").read_bytes()))
    reader.start()
    assert run_command("predict", ["run=m.pt", "output=fifo"], capfd, monkeypatch=monkeypatch)[0] == 0
    reader.join(timeout=30)
    assert (tmp / "fifo").is_fifo() and got and got[0].decode().endswith("\n")
    assert run_command("predict", ["run=m.pt", "output=/dev/null"], capfd, monkeypatch=monkeypatch)[0] == 0
    assert Path("/dev/null").is_char_device()


def test_an_empty_output_is_stdout(tmp, capfd, monkeypatch):
    status, out, err = run_command("predict", ["run=m.pt", "output="], capfd, monkeypatch=monkeypatch)
    assert status == 0 and out.count("\n") == 1 and not (tmp / "None").exists()
    status, out, err = run_command("evaluate", ["run=m.pt", "output=", f"out_dir={tmp / 'ev'}"], capfd)
    assert status == 0 and json.loads(out)["ppl"] > 1 and "[evaluate]" in err  # progress on stderr, JSON alone
    assert not (tmp / "None").exists()


def test_invalid_utf8_is_a_line_error_naming_the_file_and_line(tmp, capfd, monkeypatch):
    (tmp / "mixed.txt").write_bytes(b"the cat\n\xff\xfe dog\nthe dog\n")
    status, out, err = run_command("predict", ["run=m.pt", "input=mixed.txt", "mode=score"], capfd,
                                   monkeypatch=monkeypatch)
    assert status == 2 and len(out.splitlines()) == 4  # the two good lines, the bad one empty, the total
    assert "[predict] error: input=mixed.txt line 2: not valid UTF-8 (byte 0xff at column 1)" in err
    assert out.splitlines()[1] == "" and out.splitlines()[2].endswith("the dog")


def test_lm_lines_of_unknown_words_get_a_warning(tmp, capfd, monkeypatch):
    status, out, err = run_command("predict", ["run=m.pt", "mode=score"], capfd, stdin="the cat\nzzqx qqqz\n",
                                   monkeypatch=monkeypatch)
    assert status == 0 and "[predict] warning: line(s) 2: every word is unknown to the model's vocabulary" in err


@pytest.mark.parametrize("overrides,task,message", [
    (["task.data.files.test=nope.csv"], "classification",
     "task.data.files.test=nope.csv: read only with task.data.source=files, and this run's source is None"),
    (["task.data.files.test=nope.json"], "squad",
     "task.data.files.test=nope.json: read only with task.data.source=files, and this run's source is generated"),
    (["task.data.test_file=nope.txt"], "lm",
     "task.data.test_file=nope.txt: read only with task.data.source=files, and this run's source is ptb"),
    (["task.data.manifests.test=nope.jsonl"], "speech",
     "task.data.manifests.test=nope.jsonl: read only with task.data.source=manifest"),
    (["task.data.labels=[a,b]"], "classification", "task.data.labels=[a,b]: changes what the trained model means"),
    (["task.subwords.vocab_size=100"], "translation", "task.subwords.vocab_size=100: changes what the trained model"),
    (["task.features.n_mels=40"], "speech", "task.features.n_mels=40: changes what the trained model means"),
], ids=["classification-files", "squad-files", "lm-test-file", "speech-manifest", "labels", "subwords", "features"])
def test_an_override_that_would_be_ignored_or_change_the_model_is_refused(overrides, task, message):
    from tasks.engine.inference.loader import apply_overrides

    saved = compose([f"task={task}"])
    cfg = saved.copy()
    apply_overrides(cfg, overrides)
    with pytest.raises(ConfigError) as err:
        check_overrides(saved, cfg, overrides)
    assert str(err.value).startswith(message)
    switched = saved.copy()  # with the source named, the same override is the data scored
    source_given = ["task.data.source=" + ("manifest" if task == "speech" else "files")] + overrides
    apply_overrides(switched, source_given)
    if "changes what" not in message:
        check_overrides(saved, switched, source_given)


# ---- item 4: the tasks' own input lines ---------------------------------------------------------------------

@pytest.mark.parametrize("row,message", [
    ({"id": "q", "context": "  ", "question": "Where?"}, "empty 'context': there is nothing to answer from"),
    ({"id": "q", "context": "Paris is in France.", "question": ""}, "empty 'question'"),
    ({"context": "Paris is in France.", "question": "Where?"}, "no 'id': each question needs one"),
], ids=["empty-context", "empty-question", "no-id"])
def test_squad_lines_with_nothing_to_answer_are_line_errors(row, message):
    task = build_task(compose(["task=squad"]))
    with pytest.raises(ValueError, match=message):
        task.parse_input(json.dumps(row))


def test_a_squad_v11_file_without_answers_is_read_for_predict():
    task = build_task(compose(["task=squad"]))
    doc = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": "Paris is in France.", "qas": [{"id": "q1", "question": "Where is Paris?"}]}]}]}
    examples = task.read_document(json.dumps(doc))
    assert [e.qid for e in examples] == ["q1"]


def test_audio_with_nan_or_shorter_than_a_frame_is_a_line_error(tmp_path):
    import soundfile

    task = build_task(compose(["task=speech"]))
    rate = task.task_cfg.data.sample_rate
    wave = np.full(rate, 0.1, dtype=np.float32)
    wave[100] = np.nan
    soundfile.write(tmp_path / "nan.wav", wave[:, None], rate, subtype="FLOAT")
    with pytest.raises(ValueError, match="1 samples are NaN or infinite"):
        task.parse_input(str(tmp_path / "nan.wav"))
    soundfile.write(tmp_path / "one.wav", np.zeros((1, 1), np.float32), rate)
    with pytest.raises(ValueError, match=r"1 samples \(0.1 ms\), shorter than one feature frame"):
        task.parse_input(str(tmp_path / "one.wav"))


# ---- item 6: a signal at any moment of start-up -------------------------------------------------------------

def _handles_sigterm(pid: int) -> bool:
    """The command installed its own handler (Python alone catches SIGINT, never SIGTERM)."""
    import signal

    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_signal_during_start_up_is_one_line_128_plus_signal_and_nothing_written(command, tmp):
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).parents[1]
    for n, delay in enumerate((0.0, 0.1, 0.3, 0.6, 1.0, 1.5)):
        sig = (signal.SIGINT, signal.SIGTERM)[n % 2]
        out = tmp / f"out{n}.txt"
        proc = subprocess.Popen([sys.executable, str(root / f"{command}.py"), "run=m.pt", f"output={out}",
                                 f"out_dir={tmp / f'ev{n}'}"][:4 if command == "evaluate" else 3],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(root)))
        deadline = time.time() + 60
        while not _handles_sigterm(proc.pid) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        if n == 0:  # installed before the heavy imports: torch is not loaded yet when the handler is there
            assert "libtorch" not in Path(f"/proc/{proc.pid}/maps").read_text()
        time.sleep(delay)
        if proc.poll() is not None:  # finished before the signal (a fast machine): nothing to check this round
            proc.communicate()
            continue
        proc.send_signal(sig)
        _, err = proc.communicate(input=MODEL_LINE, timeout=120)
        nothing = "no results written" if command == "predict" else "no metrics written"
        if out.exists():  # the signal came once the command was done (status 0, or killed while exiting)
            assert out.read_text().endswith("\n") and proc.returncode in (0, -sig), (delay, proc.returncode, err)
            continue
        assert proc.returncode == 128 + sig, (delay, proc.returncode, err)
        assert err.strip().splitlines()[-1] == f"[{command}] stopped by {sig.name}; {nothing}", err
        assert "Traceback" not in err and "Error" not in err, err
        assert not out.exists() and not list(tmp.glob(".out*.tmp")), (delay, err)


# ---- item 5: long audio is read and transcribed window by window ---------------------------------------------

def test_a_long_file_is_cut_into_bounded_windows_at_pauses_holding_every_sample(tmp_path):
    import soundfile

    from tasks.speech.inference import audio_info
    from tasks.speech.long_audio import LONG_S, WINDOW_S, check_long_audio, windows

    rate = 8000
    seconds = int(LONG_S) + 15
    t = np.arange(seconds * rate) / rate
    wave = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    for pause in (27.0, 55.5):  # one pause in the last 5 s of each full window
        wave[int(pause * rate):int((pause + 0.4) * rate)] = 0.0
    soundfile.write(tmp_path / "long.wav", wave, rate, subtype="FLOAT")
    audio = check_long_audio(tmp_path / "long.wav", audio_info(str(tmp_path / "long.wav")))
    assert audio.seconds == pytest.approx(seconds)
    parts = list(windows(audio, rate))
    assert all(len(p) <= WINDOW_S * rate for p in parts) and len(parts) == 3
    assert np.array_equal(np.concatenate(parts), wave)  # every sample once, in order
    ends = np.cumsum([len(p) for p in parts])[:-1] / rate
    assert 27.0 <= ends[0] <= 27.4 and 55.5 <= ends[1] <= 55.9  # cut inside the pauses
    wave[int(70.5 * rate)] = np.inf
    soundfile.write(tmp_path / "bad.wav", wave, rate, subtype="FLOAT")
    with pytest.raises(ValueError, match=r"1 samples are NaN or infinite \(the first at 70.5 s\)"):
        check_long_audio(tmp_path / "bad.wav", audio_info(str(tmp_path / "bad.wav")))


# ---- more probe rows: checks that need a task's saved config, a full device, the SQuAD notice ---------------

@pytest.mark.parametrize("task,given,message", [
    ("translation", {"nbest": 8}, "nbest=8: expected an integer from 1 to beam=6 (that many hypotheses exist)"),
    ("translation", {"nbest": 3, "beam": 2}, "nbest=3: expected an integer from 1 to beam=2"),
    ("speech", {"decoder": "greedy", "lm_weight": 0.3},
     "lm_weight=0.3: applies only with decoder=beam, and this run uses decoder=greedy; it would change nothing"),
    ("classification", {"mode": "score"}, "mode=score: an option of predict.py, task=lm, and this is a "
                                          "task=classification model"),
], ids=["nbest-above-the-saved-beam", "nbest-above-beam", "lm-weight-with-greedy", "lm-option-on-classification"])
def test_options_checked_against_the_saved_config(task, given, message):
    from tasks.engine.inference.options import OptionError, check_for_task

    cfg = compose([f"task={task}"])
    with pytest.raises(OptionError) as err:
        check_for_task(build_task(cfg), given)
    assert str(err.value).startswith(message), str(err.value)


def test_a_write_that_fails_is_one_line_naming_the_output(tmp, capfd, monkeypatch):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    status, out, err = run_command("predict", ["run=m.pt", "output=/dev/full"], capfd, monkeypatch=monkeypatch)
    assert status == 2 and "Traceback" not in err and ".tmp" not in err
    assert err.strip().splitlines()[-1] == ("[predict] error: output=/dev/full: could not be written (No space "
                                            "left on device); the file is as it was")


def test_invalid_utf8_on_stdin_is_a_line_error_too(tmp, capfd, monkeypatch):
    status, out, err = run_command("predict", ["run=m.pt", "mode=score"], capfd,
                                   stdin="the cat\n\udcff\udcfe dog\n", monkeypatch=monkeypatch)
    assert status == 2 and "[predict] error: stdin line 2: not valid UTF-8 (byte 0xff at column 1)" in err
    assert out.splitlines()[1] == ""  # never echoed back as a prediction


def test_loading_a_trained_squad_model_prints_no_training_notice(capsys):
    task = build_task(compose(["task=squad", "model.hidden_size=64"]))
    task.encoder_config()
    assert "[squad] task.encoder sets" in capsys.readouterr().out  # at training time: said once
    task.restored = True  # as the loader leaves it
    task.encoder_config()
    assert capsys.readouterr().out == ""
