"""evaluate.py / predict.py for every task config: train a tiny model, then
- evaluate.py on test equals the run's results.json ``test`` entry (same checkpoint, same data),
- predict given the test inputs writes exactly what the evaluation wrote (its predictions files),
- model.pt alone works: copied elsewhere, the run directory deleted, through the installed console script
  started from another working directory."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
from conftest import LM_FIXTURE, ROOT, tiny_lm_overrides
from test_classification_e2e import tiny_classification_overrides
from test_speech_e2e import speech_run_overrides as speech_overrides
from test_speech_e2e import manifests as speech_manifests  # noqa: F401 (a fixture)
from test_squad_e2e import tiny_squad_overrides
from test_translation_e2e import tiny_translation_overrides

from tasks.engine.inference.evaluate_cmd import evaluate_run
from tasks.engine.inference.loader import InferenceInputError
from tasks.engine.inference.predict_cmd import load_predictor

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _train_and_evaluate(run_train, overrides, tmp_path):
    run_dir = tmp_path / "run"
    summary = run_train(overrides, run_dir)
    assert (run_dir / "model.pt").is_file()
    metrics = evaluate_run([f"run={run_dir}", "split=test", f"out_dir={tmp_path / 'eval'}",
                            f"output={tmp_path / 'metrics.json'}"])
    scored = json.loads((tmp_path / "metrics.json").read_text())
    assert 0.0 <= scored.pop("unk_share", 0.0) < 0.05  # evaluate.py's own key: the share of unknown tokens
    assert scored == json.loads(json.dumps(summary["test"]))
    assert metrics[summary["monitor"]] == summary["test"][summary["monitor"]]
    assert not (run_dir / "metrics_test.json").exists()  # evaluate.py never writes into the run dir
    return run_dir, tmp_path / "eval"


def _alone(run_dir: Path, tmp_path: Path) -> Path:
    """model.pt moved out and the run directory deleted."""
    model = tmp_path / "elsewhere" / "model.pt"
    model.parent.mkdir()
    shutil.copy(run_dir / "model.pt", model)
    shutil.rmtree(run_dir)
    return model


def _console(command: str, args, cwd: Path, stdin: str = "") -> str:
    done = subprocess.run([str(BIN / command), *map(str, args)], input=stdin, capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_lm_evaluate_predict_and_model_file(run_train, tmp_path):
    run_dir, _ = _train_and_evaluate(run_train, tiny_lm_overrides(steps=8), tmp_path)
    predictor = load_predictor(run_dir, mode="score")
    lines = (LM_FIXTURE / "test.txt").read_text().splitlines()[:3]
    scored = predictor.predict(lines)
    assert [r["tokens"] for r in scored] == [len(x.split()) + 1 for x in lines]
    model = _alone(run_dir, tmp_path)
    out = _console("sru-predict", [f"run={model}", "mode=score"], tmp_path, "\n".join(lines) + "\n")
    assert [float(x.split("\t")[0].split()[1]) for x in out.splitlines()[:3]] == \
        pytest.approx([r["logprob"] for r in scored], abs=1e-4)
    assert out.splitlines()[-1].split("\t")[-1] == "TOTAL (3 lines)"
    generated = _console("sru-predict", [f"run={model}", "max_tokens=5", "seed=1"], tmp_path, "the cat\n")
    assert len(generated.splitlines()) == 1 and 1 <= len(generated.split()) <= 5
    # evaluate from the file alone, on a test file given on the command line
    metrics = tmp_path / "alone.json"
    _console("sru-evaluate", [f"run={model}", f"task.data.test_file={LM_FIXTURE / 'test.txt'}", f"output={metrics}",
                              f"out_dir={tmp_path / 'e2'}"], tmp_path)
    assert json.loads(metrics.read_text())["ppl"] == pytest.approx(
        json.loads((tmp_path / "metrics.json").read_text())["ppl"], rel=1e-6)


def test_lm_char_predict_scores_bits_per_character(run_train, tmp_path):
    overrides = ["task=lm_char" if o == "task=lm" else o for o in tiny_lm_overrides(steps=6)]
    run_dir, _ = _train_and_evaluate(run_train, overrides, tmp_path)
    result = load_predictor(run_dir, mode="score").predict(["the cat sat"])[0]
    assert result["tokens"] == len("the cat sat") and result["bpc"] > 0


def test_classification_predict_equals_evaluation(run_train, tmp_path):
    run_dir, out = _train_and_evaluate(run_train, tiny_classification_overrides("sru", epochs=2), tmp_path)
    written = [json.loads(x) for x in (out / "predictions_test.jsonl").read_text().splitlines()]
    predictor = load_predictor(run_dir)
    got = predictor.predict([w["text"] for w in written])
    assert [{"label": g["label"], "probabilities": g["probabilities"]} for g in got] == \
        [{"label": w["label"], "probabilities": w["probabilities"]} for w in written]
    model = _alone(run_dir, tmp_path)
    lines = _console("sru-predict", [f"run={model}"], tmp_path, written[0]["text"] + "\n").splitlines()
    assert json.loads(lines[0])["label"] == got[0]["label"]


@pytest.mark.parametrize("readers", [1, 2])  # one reader; an ensemble (tasks/squad/model.py: ReaderEnsemble)
def test_squad_predict_equals_evaluation(run_train, tmp_path, readers):
    overrides = [*tiny_squad_overrides("sru", steps=6), f"task.readers={readers}"]
    run_dir, out = _train_and_evaluate(run_train, overrides, tmp_path)
    keys = torch.load(run_dir / "model.pt", map_location="cpu", weights_only=False)["model"]
    assert any(k.startswith("members.1.") for k in keys) == (readers == 2)
    squad_file = ROOT / "tests" / "fixtures" / "squad" / "tiny-v1.1.json"
    model = _alone(run_dir, tmp_path)
    official = json.loads(_console("sru-predict", [f"run={model}", f"input={squad_file}"], tmp_path))
    assert official == json.loads((out / "predictions_test.json").read_text())
    paragraph = json.loads(squad_file.read_text())["data"][0]["paragraphs"][0]
    line = json.dumps({"id": "q1", "context": paragraph["context"], "question": paragraph["qas"][0]["question"]})
    answer = json.loads(_console("sru-predict", [f"run={model}"], tmp_path, line + "\n"))
    assert paragraph["context"][answer["start"]:answer["end"]] == answer["answer"] and 0 <= answer["score"] <= 1


def test_translation_predict_writes_the_evaluations_hypotheses(run_train, tmp_path):
    run_dir, out = _train_and_evaluate(run_train, tiny_translation_overrides("transformer_sru", tmp_path / "cache",
                                                                             steps=20), tmp_path)
    model = _alone(run_dir, tmp_path)
    hyp = tmp_path / "hyp.txt"
    _console("sru-predict", [f"run={model}", f"input={out / 'src_test.txt'}", f"output={hyp}"], tmp_path)
    assert hyp.read_bytes() == (out / "hyp_test.txt").read_bytes()


def stopped_while_reading_stdin(run_dir, tmp_path):
    """Ctrl-C or SIGTERM while predict.py waits for input: one line, status 128+signal, no traceback,
    nothing written (the run context's signal handlers, as in training)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen([sys.executable, str(ROOT / "predict.py"), f"run={run_dir}",
                                 f"output={tmp_path / 'never.txt'}"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        deadline = time.time() + 120
        try:  # the kernel names the wait (pipe_read, anon_pipe_read, pipe_wait): blocked on the still-open stdin
            while "pipe" not in Path(f"/proc/{proc.pid}/wchan").read_text() and time.time() < deadline:
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                time.sleep(0.05)
        except FileNotFoundError:
            deadline = 0.0
        waiting = time.time() < deadline
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if not waiting:  # not a skip: the rest of the calling test still counts
            warnings.warn("Ctrl-C check not made: this kernel does not name a process's wait in /proc/<pid>/wchan")
            return
        assert proc.returncode == 128 + sig, (sig, proc.returncode, err)
        assert f"stopped by {sig.name}; no results written" in err and "Traceback" not in err, err
        assert not (tmp_path / "never.txt").exists()


def test_bad_inputs_get_one_line_and_status_2(run_train, tmp_path):
    run_dir = tmp_path / "run"
    run_train(tiny_lm_overrides(steps=2), run_dir)
    cases = [
        (["run=" + str(tmp_path / "nothing")], "", "no such file or directory"),
        (["run=" + str(tmp_path)], "", "no checkpoints/best.pt and no model.pt"),
        ([f"run={run_dir}", "frobnicate=1"], "", "frobnicate: not an option"),
        ([f"run={run_dir}", "task.data.nokey=1"], "", "task.data.nokey: the saved config has no such key"),
        ([f"run={run_dir}", f"input={tmp_path}"], "", "a directory, not a file"),
        ([f"run={run_dir}", "mode=score"], "the cat\n\nthe dog\n", "line 2: empty line"),
    ]
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    cases.append(([f"run={tmp_path / 'junk.pt'}"], "", "is damaged or not a PyTorch file"))
    if not torch.cuda.is_available():  # a device this machine lacks: refused before the model is built
        cases.append(([f"run={run_dir}", "device=cuda"], "the cat\n", "device=cuda: not available on this machine; "
                                                                     "pass device=cpu"))
    for args, stdin, message in cases:
        done = subprocess.run([sys.executable, str(ROOT / "predict.py"), *args], input=stdin, capture_output=True,
                              text=True, cwd=tmp_path, timeout=120)
        assert done.returncode == 2, (args, done.stderr)
        errors = [x for x in done.stderr.splitlines() if "error" in x]
        assert len(errors) == 1 and message in errors[0] and "Traceback" not in done.stderr, (args, done.stderr)
    # the bad line is reported; the good ones are still written, in order
    scored = subprocess.run([sys.executable, str(ROOT / "predict.py"), f"run={run_dir}", "mode=score"],
                            input="the cat\n\nthe dog\n", capture_output=True, text=True, cwd=tmp_path).stdout
    rows = scored.splitlines()
    assert rows[0].endswith("the cat") and rows[1] == "" and rows[2].endswith("the dog")
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), f"run={run_dir}",
                           f"out_dir={run_dir / 'inside'}"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "inside the run directory" in done.stderr
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), f"run={run_dir}",
                           f"task.data.test_file={tmp_path / 'missing.txt'}"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "LM data file not found" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "outputs").exists() or not any((tmp_path / "outputs").rglob("metrics_*.json"))
    stopped_while_reading_stdin(run_dir, tmp_path)
    if not torch.cuda.is_available():  # a device this machine lacks: named before any set-up, no folder left
        with pytest.raises(InferenceInputError, match="device=cuda: not available on this machine; pass device=cpu"):
            evaluate_run([f"run={run_dir}", "device=cuda", f"out_dir={tmp_path / 'on_cuda'}"])
        assert not (tmp_path / "on_cuda").exists()


@pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("sox") is None,
                    reason="espeak-ng and sox synthesise the test clips (apt-get install -y espeak-ng sox)")
@pytest.mark.parametrize("decoding", [["task.decoder=greedy"], ["task.decoder=beam", "task.lm_order=3"]])
def test_speech_transcribes_the_test_audio_as_evaluation_did(speech_manifests, decoding, run_train, tmp_path):
    import numpy as np
    import soundfile

    overrides = speech_overrides(speech_manifests, "sru", tmp_path / "cache", [*decoding, "task.beam_size=3"])
    run_dir, out = _train_and_evaluate(run_train, overrides, tmp_path)
    written = [json.loads(x) for x in (out / "transcripts_test.jsonl").read_text().splitlines()]
    model = _alone(run_dir, tmp_path)
    lines = _console("sru-predict", [f"run={model}", *[w["audio"] for w in written]], tmp_path).splitlines()
    assert [json.loads(x)["text"] for x in lines] == [w["hypothesis"] for w in written]
    # any sample rate, stereo: resampled and mixed down to the model's input
    wave, rate = soundfile.read(written[0]["audio"], dtype="float32")
    stereo = tmp_path / "stereo.flac"
    soundfile.write(stereo, np.stack([wave, wave], 1)[::2], rate // 2)
    result = json.loads(_console("sru-predict", [f"run={model}"], tmp_path, f"{stereo}\n"))
    assert result["audio"] == str(stereo) and result["seconds"] == pytest.approx(len(wave) / rate, abs=0.01)


def test_a_run_from_before_model_pt_is_exported_and_predicts_the_same(run_train, tmp_path):
    """A checkpoint without the inference state (classification kept none before model.pt): the loader
    rebuilds the vocabulary from the training data, and export= writes a model file that predicts alike."""
    import torch

    run_dir = tmp_path / "run"
    run_train(tiny_classification_overrides("sru", epochs=1), run_dir)
    (run_dir / "model.pt").unlink()
    best = run_dir / "checkpoints" / "best.pt"
    old = torch.load(best, weights_only=True)
    old["task"] = {}
    torch.save(old, best)
    sentences = ["a gorgeous , witty , seductive movie .", "the plot is a mess ."]
    before = load_predictor(run_dir).predict(sentences)
    exported = tmp_path / "exported.pt"
    done = subprocess.run([sys.executable, str(ROOT / "predict.py"), f"run={run_dir}", f"export={exported}"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and "was saved before model.pt existed" in done.stderr, done.stderr
    shutil.rmtree(run_dir)
    assert load_predictor(exported).predict(sentences) == before
    again = subprocess.run([sys.executable, str(ROOT / "predict.py"), f"run={exported}", f"export={exported}"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 2 and "never overwritten" in again.stderr
