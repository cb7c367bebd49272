"""Batching shared by every task: length-bucketed batches by a token/frame budget, and one padding collate.

    plan = bucket_batches(lengths, max_tokens=4000, max_examples=64, shuffle=True, seed=1, epoch=3)
    mine = shard_batches(plan, train=True)                 # this DDP rank's batches (equal counts)
    batch = pad_collate([seqs[i] for i in mine[0]], pad_id) # tokens (L, B), mask_pad (L, B), lengths (B,)

Why buckets: sorting examples by length before cutting batches keeps padding small (a batch costs
max_len x n), and a token budget keeps memory and time per batch roughly constant whatever the lengths.
Why deterministic in (seed, epoch): a run resumed mid-epoch must see exactly the batches of the run that
never stopped. Why equal counts per rank: every rank of a DDP step runs one backward; a rank with one
batch more would wait forever in the all-reduce. Training drops the last ``len % world`` batches of an
epoch (at most world-1; the shuffle changes them every epoch), evaluation keeps every batch.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from tasks.engine.run import distributed

Batch = List[int]


def _generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) * 1_000_003 + int(epoch))


def bucket_batches(lengths: Sequence[int], max_tokens: Optional[int] = None, max_examples: Optional[int] = None,
                   shuffle: bool = False, seed: int = 0, epoch: int = 0, sort: bool = True) -> List[Batch]:
    """Cut examples into batches whose padded size ``max(len) * n`` stays within ``max_tokens`` and whose
    size stays within ``max_examples``; a longer single example gets a batch of its own.

    sort=True buckets by length (ties broken by the shuffle when ``shuffle``); sort=False keeps the
    (shuffled) order, i.e. plain fixed-size batches when only ``max_examples`` is given.
    With ``shuffle`` the order of examples and of the resulting batches is a pure function of (seed, epoch).
    """
    if max_tokens is None and max_examples is None:
        raise ValueError("bucket_batches: give max_tokens, max_examples or both")
    for name, value in (("max_tokens", max_tokens), ("max_examples", max_examples)):
        if value is not None and int(value) < 1:
            raise ValueError(f"{name}: expected a positive integer, received {value}")
    n = len(lengths)
    g = _generator(seed, epoch) if shuffle else None
    order = torch.randperm(n, generator=g).tolist() if shuffle else list(range(n))
    if sort:  # stable sort: equal lengths keep the shuffled order
        order.sort(key=lambda i: lengths[i])
    batches: List[Batch] = []
    current: Batch = []
    longest = 0
    for i in order:
        longer = max(longest, int(lengths[i]))
        too_many = max_examples is not None and len(current) + 1 > max_examples
        too_big = max_tokens is not None and longer * (len(current) + 1) > max_tokens
        if current and (too_many or too_big):
            batches.append(current)
            current, longer = [], int(lengths[i])
        current.append(i)
        longest = longer
    if current:
        batches.append(current)
    if shuffle and sort:  # buckets come out shortest first: shuffle the batch order too
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[j] for j in perm]
    return batches


def shard_batches(batches: Sequence[Batch], train: bool, rank: Optional[int] = None,
                  world_size: Optional[int] = None) -> List[Batch]:
    """This rank's share of whole batches: batches rank, rank+W, rank+2W ...

    train=True: every rank gets exactly ``len(batches) // W`` batches (the remainder is dropped).
    train=False: every batch is evaluated once by some rank (counts may differ by one).
    """
    rank = distributed.get_rank() if rank is None else rank
    world_size = distributed.get_world_size() if world_size is None else world_size
    if train:
        usable = len(batches) - len(batches) % world_size
        if usable == 0:
            raise ValueError(f"{len(batches)} training batch(es) cannot give each of {world_size} processes one; "
                             f"use a smaller batch size (task.max_tokens / task.batch_size) or fewer processes")
        batches = batches[:usable]
    return [list(b) for b in batches[rank::world_size]]


def split_batch(batch: Batch, rank: Optional[int] = None, world_size: Optional[int] = None) -> Batch:
    """This rank's contiguous part of ONE global batch (``task.batch_size`` is the global batch).

    Shares may differ by one example: with ``sample_size`` normalisation the update is still exactly the
    single-process one. A batch with fewer examples than processes cannot be split (see ``global_batches``).
    """
    return list(batch[distributed.shard_slice(len(batch), even=False, rank=rank, world_size=world_size)])


def global_batches(n: int, batch_size: int, shuffle: bool, seed: int = 0, epoch: int = 0,
                   world_size: Optional[int] = None) -> List[Batch]:
    """Fixed-size global batches of ``n`` examples (shuffled in (seed, epoch) order); a last batch smaller
    than the number of processes is dropped so every rank gets a share of every batch."""
    world_size = distributed.get_world_size() if world_size is None else world_size
    batches = bucket_batches([1] * n, max_examples=batch_size, shuffle=shuffle, seed=seed, epoch=epoch, sort=False)
    return [b for b in batches if len(b) >= world_size]


class PlanCache:
    """This rank's batch plans by (split, epoch, seed), each computed once by ``make(split, epoch, seed)``.

    ``num_batches`` and ``batches`` must see the same plan, and a length-bucketed plan costs a sort of
    the split: cache it. Evaluation plans do not depend on epoch or seed; only the newest training
    epoch's plan is kept (one epoch's index lists, not every epoch's).
    """

    def __init__(self, make: Callable[[str, int, int], List[Batch]]):
        self.make = make
        self.plans: Dict[Tuple[str, int, int], List[Batch]] = {}

    def get(self, split: str, epoch: int, seed: int) -> List[Batch]:
        train = split == "train"
        key = (split, epoch if train else 0, seed if train else 0)
        if key not in self.plans:
            plan = self.make(split, epoch, seed)
            if train:
                self.plans = {k: v for k, v in self.plans.items() if k[0] != "train"}
            self.plans[key] = plan
        return self.plans[key]


def pad_collate(seqs: Sequence[Union[Sequence[int], Tensor]], pad_value: Union[int, float] = 0
                ) -> Tuple[Tensor, Tensor, Tensor]:
    """Right-pad sequences into a time-major batch.

    Token ids (lists or 1-d tensors) -> (L, B) long; feature frames (2-d tensors (T, D)) -> (L, B, D).
    Returns ``(padded, mask_pad, lengths)``: ``mask_pad`` (L, B) bool, true on padding, which is what the
    encoders take; ``lengths`` (B,) long.
    """
    if not seqs:
        raise ValueError("pad_collate: received an empty batch")
    tensors = [s if isinstance(s, Tensor) else torch.as_tensor(list(s), dtype=torch.long) for s in seqs]
    lengths = torch.tensor([t.size(0) for t in tensors], dtype=torch.long)
    longest = int(lengths.max())
    tail = tuple(tensors[0].shape[1:])
    padded = torch.full((longest, len(tensors), *tail), pad_value, dtype=tensors[0].dtype)
    for j, t in enumerate(tensors):
        padded[: t.size(0), j] = t
    mask_pad = torch.arange(longest).unsqueeze(1) >= lengths.unsqueeze(0)
    return padded, mask_pad, lengths
