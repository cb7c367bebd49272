"""Speed perturbation (task.speed_perturb): the resampling plays audio faster/slower with tempo and pitch
together, and the task draws one speed version per training utterance and epoch, reproducibly."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile
import torch
from conftest import compose

from tasks.engine.errors import ConfigError
from tasks.engine.base import build_task
from tasks.speech.features import change_speed

SR = 16000


def _peak_hz(wave: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(wave * np.hanning(len(wave))))
    return float(np.fft.rfftfreq(len(wave), 1 / SR)[spectrum.argmax()])


@pytest.mark.parametrize("factor", [0.9, 1.1, 1.25])
def test_change_speed_scales_length_and_pitch(factor):
    tone = np.sin(2 * np.pi * 440.0 * np.arange(SR) / SR).astype(np.float32)  # 1 s at 440 Hz
    played = change_speed(tone, factor)
    assert played.dtype == np.float32
    assert abs(len(played) - SR / factor) <= 1
    assert _peak_hz(played) == pytest.approx(440.0 * factor, abs=2.0)  # 1 Hz bins over >= 0.8 s
    assert change_speed(tone, 1.0) is tone


def _manifests(tmp_path):
    texts = {"train": ["ab", "ba", "abab"], "valid": ["ab"], "test": ["ba"]}
    paths = {}
    for split, rows in texts.items():
        lines = []
        for i, text in enumerate(rows):
            wave = np.sin(np.arange(int(SR * (0.5 + 0.25 * i))) * (0.05 + 0.01 * i)).astype(np.float32)
            soundfile.write(str(tmp_path / f"{split}{i}.wav"), wave, SR)
            lines.append(json.dumps({"id": f"{split}{i}", "audio": f"{split}{i}.wav", "text": text}))
        paths[split] = tmp_path / f"{split}.jsonl"
        paths[split].write_text("\n".join(lines) + "\n")
    return ["task=speech", "task.data.source=manifest", f"task.data.cache_dir={tmp_path / 'cache'}",
            *(f"task.data.manifests.{s}={p}" for s, p in paths.items()), "task.features.stack=1",
            "task.features.skip=1", "task.spec_augment.freq_masks=0", "task.spec_augment.time_masks=0", "seed=3"]


def test_each_epoch_draws_one_speed_version_per_training_utterance(tmp_path):
    task = build_task(compose(_manifests(tmp_path) + ["task.speed_perturb=[0.8,1.25]"]))
    task.check_config()
    task.setup()
    assert task.speeds == [1.0, 0.8, 1.25]  # the unperturbed version first
    train = task.data["train"]
    for i, versions in enumerate(train["versions"]):
        (x1, f1), (x08, f08), (x125, f125) = versions
        assert torch.equal(x1, train["x"][i]) and f1 == train["frames"][i]
        assert abs(f08 - f1 / 0.8) <= 2 and abs(f125 - f1 / 1.25) <= 2  # 10 ms frames of longer/shorter audio
    assert all(len(v) == 1 for v in task.data["valid"]["versions"])  # evaluation: the audio as recorded
    draws = {epoch: task._epoch_inputs("train", epoch, seed=3)[1] for epoch in range(6)}
    assert draws[2] == task._epoch_inputs("train", 2, seed=3)[1]  # the same epoch draws the same versions
    assert len({tuple(d) for d in draws.values()}) > 1             # other epochs draw others
    # the batches hand out the drawn versions, and count their frames
    inputs, frames = task._epoch_inputs("train", 4, seed=3)
    batches = list(task.batches("train", epoch=4, seed=3))
    assert sum(b["frames"] for b in batches) == sum(frames)
    for batch in batches:
        for row, i in enumerate(batch["index"]):
            assert torch.equal(batch["x"][: inputs[i].size(0), row], inputs[i])


def test_no_perturbation_by_default_and_bad_factors_refused(tmp_path):
    overrides = _manifests(tmp_path)
    task = build_task(compose(overrides))
    task.setup()
    assert task.speeds == [1.0] and task._epoch_inputs("train", 5, seed=3)[0] is task.data["train"]["x"]
    with pytest.raises(ConfigError, match=r"task.speed_perturb: factors must lie in \[0.5, 2\].*\[3.0\]"):
        build_task(compose(overrides + ["task.speed_perturb=[0.9,3.0]"])).check_config()
