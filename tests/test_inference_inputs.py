"""predict.py's input checks, one line each, with no model trained (the fast tier): the task's
``parse_input`` refuses a bad line with a message naming it, and the loader refuses what is not a model."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import compose

from tasks.engine.inference.options import split_arguments
from tasks.engine.inference.loader import InferenceInputError, find_weights, read_saved
from tasks.engine.base import build_task


@pytest.mark.parametrize("line,message", [
    ("not json", "not a JSON line"),
    (json.dumps({"id": "q", "context": "Paris is in France."}), "no 'question' string"),
    (json.dumps({"id": "q", "question": "Where?"}), "no 'context' string"),
    ("   ", "not a JSON line"),
])
def test_squad_lines_without_a_question_or_context_are_refused(line, message):
    task = build_task(compose(["task=squad"]))
    with pytest.raises(ValueError, match=message):
        task.parse_input(line)


def test_a_squad_line_becomes_an_example():
    task = build_task(compose(["task=squad"]))
    ex = task.parse_input(json.dumps({"id": "q7", "context": "Paris is in France.", "question": "Where is Paris?"}))
    assert (ex.qid, ex.question) == ("q7", "Where is Paris?")


def test_speech_inputs_empty_missing_unreadable_and_resampled(tmp_path):
    import soundfile

    task = build_task(compose(["task=speech"]))
    rate = task.task_cfg.data.sample_rate
    with pytest.raises(ValueError, match="empty line"):
        task.parse_input("")
    with pytest.raises(ValueError, match="no such audio file"):
        task.parse_input(str(tmp_path / "missing.wav"))
    with pytest.raises(ValueError, match="a directory, not an audio file"):
        task.parse_input(str(tmp_path))
    (tmp_path / "junk.wav").write_bytes(b"RIFF not really")
    with pytest.raises(ValueError, match="cannot decode audio"):
        task.parse_input(str(tmp_path / "junk.wav"))
    soundfile.write(tmp_path / "empty.wav", np.zeros((0, 1), dtype=np.float32), rate)
    with pytest.raises(ValueError, match="empty"):
        task.parse_input(str(tmp_path / "empty.wav"))
    stereo = np.stack([np.ones(8000, np.float32) * 0.5, np.zeros(8000, np.float32)], 1)
    soundfile.write(tmp_path / "stereo.wav", stereo, 8000)   # 1 s at 8 kHz, two channels
    path, wave, seconds = task.parse_input(str(tmp_path / "stereo.wav"))
    assert seconds == pytest.approx(1.0) and wave.ndim == 1 and len(wave) == rate
    assert wave[rate // 4:3 * rate // 4] == pytest.approx(0.25, abs=1e-3)  # mixed down, then resampled


def test_the_loader_names_what_a_file_is(tmp_path):
    with pytest.raises(InferenceInputError, match="no such file or directory"):
        find_weights(tmp_path / "nothing")
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "checkpoints" / "last.pt").write_bytes(b"")
    with pytest.raises(InferenceInputError, match="pass checkpoint=last"):
        find_weights(tmp_path / "run")
    torch.save({"weight": torch.zeros(2)}, tmp_path / "state_dict.pt")
    with pytest.raises(InferenceInputError, match="not a model of this project"):
        read_saved(tmp_path / "state_dict.pt")
    torch.save({"model": {}, "step": 3}, tmp_path / "old.pt")
    with pytest.raises(InferenceInputError, match="older layout"):
        read_saved(tmp_path / "old.pt")
    torch.save({"format": "sru-experiments/model", "version": 99, "config": {}, "model": {}, "inference": {}},
               tmp_path / "future.pt")
    with pytest.raises(InferenceInputError, match="update the package"):
        read_saved(tmp_path / "future.pt")


def test_arguments_split_into_options_overrides_and_inputs():
    given, overrides, positional = split_arguments(
        ["run=m.pt", "beam=4", "task.decoding.length_penalty=1.0", "a.wav"], {"run", "beam"})
    assert given == {"run": "m.pt", "beam": "4"}  # text as given: command_options.py converts and checks
    assert overrides == ["task.decoding.length_penalty=1.0"] and positional == ["a.wav"]
    with pytest.raises(InferenceInputError, match="did you mean run"):
        split_arguments(["rnu=m.pt"], {"run": None})


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_input(tmp_path, monkeypatch):
    """A file saved by Notepad as UTF-8 starts with EF BB BF: the first path read '\\ufeff/a.wav' and was
    'no such audio file' (stdin alike)."""
    import io

    from tasks.engine.inference.predict_cmd import read_lines

    (tmp_path / "in.txt").write_bytes(b"\xef\xbb\xbf/data/a.wav\r\n/data/b.wav\r\n")
    assert read_lines(str(tmp_path / "in.txt"), []) == ["/data/a.wav", "/data/b.wav"]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfthe cat\n")))
    assert read_lines("-", []) == ["the cat"]
