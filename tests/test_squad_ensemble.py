"""The reader ensemble (tasks/squad/model.py: ReaderEnsemble, combine_scores): members trained each on its own
loss, answering with their mean probabilities; one reader stays a plain DocumentReader."""
from __future__ import annotations

import math

import torch

from tasks.squad.model import NEG, combine_scores


def test_one_readers_scores_pass_through():
    scores = torch.randn(3, 7)
    assert combine_scores(scores) is scores


def test_an_ensemble_answers_with_the_mean_probability():
    torch.manual_seed(0)
    scores = torch.randn(3, 2, 5)
    scores[:, 1, 4] = NEG  # padding of the second question
    combined = combine_scores(scores)
    mean = scores.softmax(-1).mean(0)
    assert torch.allclose(combined.exp(), mean, atol=1e-6)
    assert combined[1, 4] < -1e20  # padding stays impossible
    # two members sure of different tokens: the mean gives each half
    sure = torch.full((2, 1, 3), NEG)
    sure[0, 0, 0] = sure[1, 0, 2] = 0.0
    assert torch.allclose(combine_scores(sure).exp(), torch.tensor([[0.5, 0.0, 0.5]]))


def test_ensemble_loss_is_the_members_mean_and_trains_each_on_its_own():
    from conftest import compose
    from tasks.engine.base import build_task
    task = build_task(compose(["task=squad"]))
    batch = {"start": torch.tensor([1, 0]), "end": torch.tensor([2, -1])}
    members = torch.randn(3, 2, 4, requires_grad=True), torch.randn(3, 2, 4, requires_grad=True)
    loss, n = task._loss(*members, batch)
    singles = [task._loss(members[0][k], members[1][k], batch)[0] for k in range(3)]
    assert n == 2 and math.isclose(loss.item(), sum(s.item() for s in singles) / 3, rel_tol=1e-6)
    singles[1].backward()
    assert members[0].grad[0].abs().sum() == 0 and members[0].grad[2].abs().sum() == 0  # member 1's loss: its own scores
