"""tasks/common/batching.py (buckets, DDP shards, padding) and tasks/common/text.py (the shared vocabulary)."""
from __future__ import annotations

import pytest
import torch

from tasks.common.batching import bucket_batches, global_batches, pad_collate, shard_batches, split_batch
from tasks.common.text import BOS, EOS, PAD, UNK, Vocabulary

LENGTHS = [5, 1, 9, 3, 3, 7, 2, 8, 4, 6, 1, 12, 3]


def test_buckets_respect_the_token_and_example_budgets_and_cover_every_example_once():
    batches = bucket_batches(LENGTHS, max_tokens=16, max_examples=3, shuffle=True, seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(LENGTHS)))
    for b in batches:
        assert len(b) <= 3
        assert max(LENGTHS[i] for i in b) * len(b) <= 16 or len(b) == 1
    # buckets group similar lengths: far less padding than the same budget in random order
    pad = lambda bs: sum(max(LENGTHS[i] for i in b) * len(b) - sum(LENGTHS[i] for i in b) for b in bs)
    unsorted = bucket_batches(LENGTHS, max_tokens=16, max_examples=3, shuffle=True, seed=1, epoch=0, sort=False)
    assert pad(batches) < pad(unsorted)


def test_buckets_are_deterministic_in_seed_and_epoch():
    plan = lambda seed, epoch: bucket_batches(LENGTHS, max_tokens=16, shuffle=True, seed=seed, epoch=epoch)
    assert plan(1, 2) == plan(1, 2)
    assert plan(1, 2) != plan(1, 3) and plan(1, 2) != plan(2, 2)
    assert bucket_batches(LENGTHS, max_examples=4) == [[1, 10, 6, 3], [4, 12, 8, 0], [9, 5, 7, 2], [11]]


def test_an_example_over_the_budget_gets_a_batch_of_its_own():
    assert bucket_batches([3, 50, 2], max_tokens=10, sort=False) == [[0], [1], [2]]


def test_ddp_shards_give_every_rank_the_same_number_of_training_batches():
    batches = [[i] for i in range(7)]
    shards = [shard_batches(batches, train=True, rank=r, world_size=3) for r in range(3)]
    assert [len(s) for s in shards] == [2, 2, 2]
    assert sorted(i for s in shards for b in s for i in b) == list(range(6))
    evals = [shard_batches(batches, train=False, rank=r, world_size=3) for r in range(3)]
    assert sorted(i for s in evals for b in s for i in b) == list(range(7))  # evaluation keeps every batch
    with pytest.raises(ValueError, match="cannot give each of 3 processes"):
        shard_batches([[0], [1]], train=True, rank=0, world_size=3)


def test_global_batches_split_over_ranks_cover_the_batch():
    plan = global_batches(10, 4, shuffle=True, seed=0, epoch=0, world_size=3)
    assert [len(b) for b in plan] == [4, 4]  # the last batch of 2 cannot be split over 3 ranks
    parts = [split_batch(plan[0], rank=r, world_size=3) for r in range(3)]
    assert sum(parts, []) == plan[0] and [len(p) for p in parts] == [2, 1, 1]


def test_pad_collate_tokens_and_frames():
    tokens, mask, lengths = pad_collate([[4, 5, 6], [7]], pad_value=0)
    assert tokens.tolist() == [[4, 7], [5, 0], [6, 0]] and lengths.tolist() == [3, 1]
    assert mask.tolist() == [[False, False], [False, True], [False, True]]
    frames, mask, _ = pad_collate([torch.ones(2, 3), torch.ones(4, 3)], pad_value=0.0)
    assert frames.shape == (4, 2, 3) and frames[2:, 0].abs().sum() == 0 and mask[:, 1].sum() == 0


def test_vocabulary_specials_order_frequency_and_round_trip(tmp_path):
    vocab = Vocabulary.build([["b", "a", "b"], ["c", "b", "a", "<s>"]], specials=(PAD, UNK, BOS, EOS))
    assert vocab.itos == [PAD, UNK, BOS, EOS, "b", "a", "c"]  # specials, then by frequency, ties a-z
    assert (vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2, 3)
    assert vocab.encode(["a", "zzz"]) == [5, 1]
    assert vocab.decode([2, 4, 1, 3, 0]) == ["b", UNK]  # specials other than <unk> dropped
    vocab.save(tmp_path / "vocab.json")
    assert Vocabulary.load(tmp_path / "vocab.json").itos == vocab.itos
    lm = Vocabulary.build([["x", "y", "x"]], specials=(UNK, "<eos>"), max_size=3)
    assert lm.itos == [UNK, "<eos>", "x"] and lm.unk_id == 0
    with pytest.raises(KeyError, match="no '<pad>'"):
        lm.pad_id
    assert Vocabulary.build([["a", "a", "b"]], min_freq=2).itos == [PAD, UNK, "a"]


def test_vocabulary_bad_arguments_and_resume_guard():
    with pytest.raises(ValueError, match="needs '<unk>'"):
        Vocabulary(["a"], specials=(PAD,))
    with pytest.raises(ValueError, match="min_freq"):
        Vocabulary.build([["a"]], min_freq=0)
    vocab = Vocabulary.build([["a", "b"]])
    vocab.check_same(vocab.state_dict())
    with pytest.raises(ValueError, match="data files changed"):
        vocab.check_same(Vocabulary.build([["a", "c"]]).state_dict())
