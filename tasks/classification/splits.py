"""Train/valid/test splits: the data set's own splits, or seeded, stratified k-fold cross-validation.

Paper setup (and the official scripts): MR, CR, SUBJ and MPQA have no test split, so accuracy is the
mean over 10 folds, each fold once the test set; a validation set for model selection is carved from the
remaining nine folds. Sets that ship a test split (TREC, SST) use it, with validation carved from train if the
set has none.
"""
from __future__ import annotations

import random
from collections import defaultdict
from typing import Dict, List, Sequence, TypeVar

T = TypeVar("T")


def stratified_folds(labels: Sequence[str], n_folds: int, seed: int) -> List[List[int]]:
    """Partition ``range(len(labels))`` into ``n_folds`` folds with (nearly) equal class proportions.

    Each class's indices are shuffled with ``random.Random(seed)`` and dealt round-robin, continuing the
    deal across classes so fold sizes differ by at most one. Same labels + seed -> same folds.
    """
    if not isinstance(n_folds, int) or n_folds < 2:
        raise ValueError(f"task.data.cv_folds: expected an integer >= 2, received {n_folds!r}")
    if n_folds > len(labels):
        raise ValueError(f"task.data.cv_folds={n_folds} exceeds the number of examples ({len(labels)})")
    rng = random.Random(seed)
    by_class: Dict[str, List[int]] = defaultdict(list)
    for i, y in enumerate(labels):
        by_class[y].append(i)
    folds: List[List[int]] = [[] for _ in range(n_folds)]
    k = 0
    for y in sorted(by_class):
        idx = by_class[y]
        rng.shuffle(idx)
        for i in idx:
            folds[k % n_folds].append(i)
            k += 1
    return [sorted(f) for f in folds]


def carve(items: List[T], labels: Sequence[str], fraction: float, seed: int):
    """Split ``items`` into (rest, carved) with ``carved`` ~``fraction`` of each class (stratified)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"task.data.valid_fraction: expected a number in (0, 1), received {fraction!r}")
    n_parts = max(2, round(1.0 / fraction))
    if n_parts > len(items):
        raise ValueError(f"task.data.valid_fraction={fraction}: too small for {len(items)} examples "
                         f"(no example would be carved); raise it or give a validation file.")
    folds = stratified_folds(labels, n_parts, seed)
    carved = set(folds[0])
    rest = [x for i, x in enumerate(items) if i not in carved]
    return rest, [items[i] for i in sorted(carved)]


def cross_validation_split(items: List[T], labels: Sequence[str], n_folds: int, fold: int, seed: int,
                           valid_fraction: float) -> Dict[str, List[T]]:
    """Fold ``fold`` is the test set; valid is carved (stratified) from the other folds; train is the rest."""
    if not isinstance(fold, int) or not 0 <= fold < n_folds:
        raise ValueError(f"task.data.fold: expected an integer in [0, {n_folds}), received {fold!r}")
    folds = stratified_folds(labels, n_folds, seed)
    test_idx = set(folds[fold])
    pool = [i for i in range(len(items)) if i not in test_idx]
    # the valid carve uses a different seed stream from the folds so it doesn't mirror the fold structure
    train_idx, dev_idx = carve(pool, [labels[i] for i in pool], valid_fraction, seed + 1)
    return {"train": [items[i] for i in train_idx], "valid": [items[i] for i in dev_idx],
            "test": [items[i] for i in sorted(test_idx)]}
