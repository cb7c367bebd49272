"""task.word_dropout (tasks/squad/task.py: _unknown_words): in training each paragraph and question word is read
as <unk> with the given probability, padding never; evaluation reads every word; the paper's Table 2 cells keep
DrQA's training (no word dropout) and decoding, so the new default changes nothing they train."""
from __future__ import annotations

import pytest
import torch
from conftest import compose

from tasks.common.text import PAD, UNK, Vocabulary
from tasks.engine.base import build_task


def task_with(p):
    task = build_task(compose(["task=squad", f"task.word_dropout={p}"]))
    task.vocab = Vocabulary([f"w{k}" for k in range(50)], (PAD, UNK))
    return task


def test_words_become_unknown_at_the_rate_and_padding_stays():
    task = task_with(0.1)
    torch.manual_seed(0)
    ids = torch.randint(2, 52, (400, 50))
    ids[300:] = task.vocab.pad_id
    out = task._unknown_words(ids)
    words = ids != task.vocab.pad_id
    share = float((out[words] == task.vocab.unk_id).float().mean())
    assert 0.08 < share < 0.12
    assert torch.equal(out[~words], ids[~words])              # padding kept
    assert torch.equal(out[out != task.vocab.unk_id], ids[out != task.vocab.unk_id])  # the rest as they were


class Seen(Exception):
    """Stops compute_loss at the model with the batch it was given."""


def test_only_training_batches_are_changed(monkeypatch):
    task = task_with(0.5)
    seen = []

    def scores(model, batch):
        seen.append(batch)
        raise Seen

    monkeypatch.setattr(task, "_scores", scores)
    batch = {"context": torch.full((6, 4), 5), "question": torch.full((3, 4), 7)}
    for split in ("train", "valid"):
        with pytest.raises(Seen):
            task.compute_loss(None, batch, split)
    trained, evaluated = seen
    assert (trained["context"] == task.vocab.unk_id).any() and (trained["question"] == task.vocab.unk_id).any()
    assert evaluated is batch and (batch["context"] == 5).all()  # the caller's batch is never written


@pytest.mark.parametrize("cell", ["experiment=cpu/squad_sru", "experiment=cpu/squad_lstm",
                                  "experiment=paper/squad_sru", "experiment=paper/squad_lstm"])
def test_table_2_cells_keep_drqas_training_and_decoding(cell):
    task = compose([cell])["task"]
    assert task["word_dropout"] == 0.0 and task["answer_type_prior"] == 0.0
    assert task["answer_kinds"] is False and task["span_edges"] is False
    assert compose(["task=squad"])["task"]["word_dropout"] == 0.1
