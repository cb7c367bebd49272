"""The language classifiers on the acoustic model's own outputs (tasks/speech/language_tools.py), measured by
``python -m tasks.speech.language_tools identify --classifiers``: the logistic regression itself, the
per-utterance summaries, and the whole fit on waves (as heard and speed-shifted) through a real model."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tasks.speech.language_tools import (SPEEDS, fit_logistic, fit_rules, posterior_summary, rule_accuracy,
                                         shifted_inputs, utterance_features)


def test_logistic_regression_separates_two_clouds_and_generalises():
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(40, 3, generator=g) + torch.tensor([2.0, 0, 0]),
                   torch.randn(40, 3, generator=g) - torch.tensor([2.0, 0, 0])])
    y = torch.tensor([True] * 40 + [False] * 40)
    rule = fit_logistic(x, y)
    fresh = torch.tensor([[3.0, 5.0, -5.0], [-3.0, -5.0, 5.0]])
    assert rule.predict(fresh).tolist() == [True, False]
    assert float((rule.predict(x) == y).double().mean()) >= 0.95
    assert abs(float(rule.weight[0])) > 3 * max(abs(float(rule.weight[1])), abs(float(rule.weight[2])))


def test_logistic_regression_needs_both_classes():
    with pytest.raises(ValueError, match="one class only"):
        fit_logistic(torch.randn(5, 2), torch.ones(5, dtype=torch.bool))


def test_posterior_summary_is_the_log_share_of_each_non_blank_label():
    probs = torch.full((4, 5), 0.01)
    probs[:, 0], probs[:2, 3] = 0.96, 0.96   # two frames of label 3, two blank
    probs = probs / probs.sum(-1, keepdim=True)
    share = posterior_summary(probs.log()).exp() - 1e-4
    assert share.shape == (4,) and math.isclose(float(share.sum()), 1.0, rel_tol=1e-5)
    assert int(share.argmax()) == 2  # label 3 is the third non-blank label


@pytest.fixture(scope="module")
def small_task():
    from conftest import compose

    from tasks.engine.base import build_task

    task = build_task(compose(["task=speech", "task.data.source=offline", "model.num_layers=2",
                               "model.hidden_size=32"]))
    torch.manual_seed(0)
    return task, task.build_model().eval()


def tone(freq: float, seconds: float, rng) -> np.ndarray:
    """Quiet noise, then a tone: a stationary tone alone would vanish in the per-utterance CMVN."""
    t = np.arange(int(16000 * seconds)) / 16000
    on = t > seconds / 2
    return (0.3 * on * np.sin(2 * np.pi * freq * t) + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def test_rules_fitted_on_shifted_waves_tell_two_sounds_apart(small_task):
    """Low tones called "cs", high tones "nl": rules fitted through the model's outputs on the waves at every
    speed of SPEEDS call fresh tones of each kind right."""
    task, model = small_task
    rng = np.random.default_rng(0)
    waves = [tone(f, 0.6 + 0.1 * k, rng) for k, f in enumerate([180, 200, 220, 240, 1800, 2000, 2200, 2400])]
    languages = ["cs"] * 4 + ["nl"] * 4
    rules = fit_rules(task, model, waves, languages, "nl")
    assert set(rules) == {"posteriors", "encoder"}
    fresh = [tone(f, 0.7, rng) for f in (210, 2100)]
    feats = utterance_features(task, model, shifted_inputs(task, fresh, 1.0))
    assert feats["encoder"].shape == (2, model.encoder.output_size)
    assert rule_accuracy(rules, feats, ["cs", "nl"], "nl")["encoder"] == (100.0, 0)
    assert not model.encoder._forward_hooks  # the hook that read the encoder's states is gone
    assert len(shifted_inputs(task, fresh[:1], SPEEDS[1])[0]) > len(shifted_inputs(task, fresh[:1], 1.0)[0])
