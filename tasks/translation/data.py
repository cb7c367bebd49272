"""Where sentence pairs come from: the offline corpus of real translations (``real``, the default; built
by tasks/corpora/parallel_corpus.py), the De-En dictionary alone, local parallel files, the hub.

Every source returns ``{"train"|"valid"|"test": [{"de": ..., "en": ...}, ...]}``: language code -> raw
(detokenised) sentence, so either direction is one config key (task.src_lang / task.tgt_lang). Pairs of
``real`` also carry ``"domain"`` (the package they come from), for the per-source scores.

``dictionary``: the Ding-format dictionary of the Debian package ``trans-de-en``
(/usr/share/trans/de-en). One entry a line, ``German :: English``; both sides are lists of parts
separated by `` | `` that correspond one to one (headword, plural, example phrases, example sentences),
and each part lists alternatives separated by ``; ``. Annotations ({f}, [coll.], <variant>) and
explanations in parentheses are removed. An aligned part pair gives sentence pairs: the alternatives
pairwise when both sides list equally many, else the first of each. Pairs with at least ``min_words``
words on each side are the example sentences and phrases of the dictionary (~26k pairs).
The result is length-filtered, deduplicated (no German and no English sentence twice, so the same
sentence never lands in two splits), shuffled with ``split_seed`` and cut into train/valid/test,
then cached as jsonl under ``cache_dir`` (keyed by the file's size/mtime and the settings).
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from tasks.engine.errors import not_a_file, override
from tasks.corpora.ding import cache_key, pairs_from_ding_line
from tasks.corpora.parallel_corpus import load_real
from tasks.translation.schema import TranslationDataConfig

SPLITS = ("train", "valid", "test")
Pair = Dict[str, str]
SAMPLE_PAIRS = Path(__file__).resolve().parent / "sample_pairs.jsonl"  # 8 pairs, package data
DICTIONARY_HINT = "apt-get install trans-de-en; or try the task now on the 8 sample pairs the package ships: " + " ".join(
    ["python train.py task=translation task.data.source=files"]
    + [override(f"task.data.files.{s}", SAMPLE_PAIRS) for s in SPLITS])


def read_ding_dictionary(path: Path, min_words: int) -> List[Pair]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"the offline De-En data needs the Ding dictionary at {path} (task.data."
                                f"dictionary_path), which is missing. Install it with: {DICTIONARY_HINT}")
    pairs: List[Pair] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            pairs.extend({"de": de, "en": en} for de, en in pairs_from_ding_line(line, min_words))
    return pairs


# ---- filtering and splitting (every source) ----------------------------------------------------------
def filter_and_dedup(pairs: Iterable[Pair], langs: Sequence[str], min_words: int, max_words: int) -> List[Pair]:
    """Keep pairs with min_words..max_words words on every side; the first pair wins for a repeated sentence."""
    seen = {lang: set() for lang in langs}
    kept = []
    for pair in pairs:
        texts = [pair[lang] for lang in langs]
        if not all(min_words <= len(t.split()) <= max_words for t in texts):
            continue
        if any(t in seen[lang] for lang, t in zip(langs, texts)):
            continue
        for lang, t in zip(langs, texts):
            seen[lang].add(t)
        kept.append(pair)
    return kept


def carve_splits(pairs: List[Pair], valid_size: int, test_size: int, seed: int) -> Dict[str, List[Pair]]:
    """Shuffle deterministically (``seed``) and cut off test, then valid, the rest is train."""
    if valid_size + test_size >= len(pairs):
        raise ValueError(f"task.data.valid_size + test_size = {valid_size + test_size} leaves no training "
                         f"pairs out of {len(pairs)}; lower them")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    shuffled = [pairs[i] for i in order]
    return {"test": shuffled[:test_size], "valid": shuffled[test_size:test_size + valid_size],
            "train": shuffled[test_size + valid_size:]}


def write_jsonl(path: Path, pairs: Sequence[Pair]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    os.replace(tmp, path)  # atomic: an interrupted prepare never leaves half a file in the cache


def prepare_dictionary(data: TranslationDataConfig, cache_dir: Path) -> Dict[str, List[Pair]]:
    """The offline default, extracted on first use and cached (see the module docstring)."""
    path = Path(str(data.dictionary_path)).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"the offline De-En data needs the Ding dictionary at {path} (task.data."
                                f"dictionary_path), which is missing. Install it with: {DICTIONARY_HINT}")
    stat = path.stat()
    settings = {k: getattr(data, k) for k in ("min_words", "max_words", "valid_size", "test_size", "split_seed")}
    folder = cache_dir / f"dictionary-{cache_key(str(path), stat.st_size, int(stat.st_mtime), settings)}"
    if all((folder / f"{s}.jsonl").is_file() for s in SPLITS):
        return {s: read_jsonl(folder / f"{s}.jsonl", ("de", "en")) for s in SPLITS}
    print(f"[translation] extracting sentence pairs from {path} (first use; cached in {folder}) ...", flush=True)
    raw = read_ding_dictionary(path, int(data.min_words))
    pairs = filter_and_dedup(raw, ("de", "en"), int(data.min_words), int(data.max_words))
    print(f"[translation] {len(raw):,} pairs with >= {data.min_words} words a side, {len(pairs):,} after "
          f"the length filter (<= {data.max_words} words) and deduplication", flush=True)
    splits = carve_splits(pairs, int(data.valid_size), int(data.test_size), int(data.split_seed))
    folder.mkdir(parents=True, exist_ok=True)
    for s in SPLITS:
        write_jsonl(folder / f"{s}.jsonl", splits[s])
    return splits


# ---- local files -------------------------------------------------------------------------------------
def read_jsonl(path: Path, langs: Sequence[str]) -> List[Pair]:
    """One JSON object a line: {"de": ..., "en": ...} or the hub's {"translation": {"de": ..., "en": ...}}."""
    pairs = []
    with Path(path).open(encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {i}: not valid JSON ({err})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path} line {i}: a JSON {type(obj).__name__}; expected one object a line, "
                                 f'e.g. {{"{langs[0]}": ..., "{langs[1]}": ...}}')
            obj = obj.get("translation", obj)
            missing = [lang for lang in langs if not isinstance(obj.get(lang), str)]
            if missing:
                raise ValueError(f"{path} line {i}: missing the text of {missing}; expected keys {list(langs)}")
            pairs.append({lang: obj[lang].strip() for lang in langs})
    return pairs


def read_tsv(path: Path, langs: Sequence[str]) -> List[Pair]:
    """Tab-separated, a header row naming the language of each column (e.g. ``en<TAB>de``)."""
    with Path(path).open(encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    if not rows:
        raise ValueError(f"{path}: empty file")
    header = [h.strip() for h in rows[0]]
    missing = [lang for lang in langs if lang not in header]
    if missing:
        raise ValueError(f"{path}: the header row {header} has no column for {missing}; the first line must "
                         f"name the language of each column, e.g. {chr(9).join(langs)!r}")
    cols = [header.index(lang) for lang in langs]
    pairs = []
    for i, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise ValueError(f"{path} line {i}: {len(row)} tab-separated fields, the header has {len(header)}")
        pairs.append({lang: row[c].strip() for lang, c in zip(langs, cols)})
    return pairs


def read_parallel_text(paths: Mapping[str, Path]) -> List[Pair]:
    """One sentence a line per language; line i of every file is the same sentence pair."""
    lines = {}
    for lang, path in paths.items():
        if not Path(path).is_file():
            raise not_a_file(path, "parallel text file", f"Check task.data.files (language {lang})")
        lines[lang] = Path(path).read_text(encoding="utf-8").splitlines()
    (lang_a, path_a), (lang_b, path_b) = list(paths.items())[:2]
    if len(lines[lang_a]) != len(lines[lang_b]):
        raise ValueError(f"parallel files differ in length: {path_a} has {len(lines[lang_a])} lines, "
                         f"{path_b} has {len(lines[lang_b])} lines; line i of each must be the same sentence pair")
    return [{lang: lines[lang][i].strip() for lang in paths} for i in range(len(lines[lang_a]))]


def read_split_files(spec: Any, langs: Sequence[str]) -> List[Pair]:
    """``spec``: a .jsonl/.tsv path; a mapping language -> text file; or a prefix (``prefix.<lang>`` files)."""
    if isinstance(spec, Mapping):
        missing = [lang for lang in langs if lang not in spec]
        if missing:
            raise ValueError(f"task.data.files: {dict(spec)} names no file for {missing}")
        return read_parallel_text({lang: Path(str(spec[lang])).expanduser() for lang in langs})
    path = Path(str(spec)).expanduser()
    if path.suffix in (".jsonl", ".json"):
        if not path.is_file():
            raise not_a_file(path, "translation data file", "Check task.data.files")
        return read_jsonl(path, langs)
    if path.suffix == ".tsv":
        if not path.is_file():
            raise not_a_file(path, "translation data file", "Check task.data.files")
        return read_tsv(path, langs)
    if path.is_file():  # neither format: the prefix reading would look for <file>.<lang> and miss the point
        raise ValueError(f"{path}: a {path.suffix or 'suffix-less'} file; expected .jsonl (one JSON object a line "
                         f"with keys {list(langs)}), .tsv (a header row naming the languages), or a prefix of "
                         f"<prefix>.{langs[0]} / <prefix>.{langs[1]} text files")
    return read_parallel_text({lang: Path(f"{path}.{lang}") for lang in langs})


def load_scored_files(data: TranslationDataConfig, langs: Sequence[str],
                      splits: Sequence[str]) -> Optional[Dict[str, List[Pair]]]:
    """A trained model's evaluation (evaluate.py) with ``task.data.source=files``: exactly the files named for
    the splits asked, no training file needed; None when a split asked names no file (the usual loading)."""
    files = data.files or {}
    if data.source != "files" or not all(files.get(s) for s in splits):
        return None
    pairs = {s: read_split_files(files[s], langs) for s in splits}
    for split, found in pairs.items():
        if not found:
            raise ValueError(f"task.data.files.{split}={files[split]}: empty, it holds no sentence pairs")
    return pairs


def load_files(data: TranslationDataConfig, langs: Sequence[str]) -> Dict[str, List[Pair]]:
    files = data.files or {}
    if not files.get("train"):
        raise ValueError("task.data.source=files: expected task.data.files.train (and optionally valid/test): "
                         "a .jsonl/.tsv file, {<lang>: file, ...} or a prefix of <prefix>.<lang> files")
    splits = {s: read_split_files(files[s], langs) for s in SPLITS if files.get(s)}
    for split, pairs in splits.items():
        if not pairs:
            raise ValueError(f"task.data.files.{split}={files[split]}: empty, it holds no sentence pairs")
    if "valid" not in splits or "test" not in splits:  # carve the missing ones from train, deterministically
        carved = carve_splits(splits["train"], int(data.valid_size) if "valid" not in splits else 0,
                              int(data.test_size) if "test" not in splits else 0, int(data.split_seed))
        splits = {"train": carved["train"], "valid": splits.get("valid", carved["valid"]),
                  "test": splits.get("test", carved["test"])}
    return splits


# ---- the hub -----------------------------------------------------------------------------------------
def load_hub(data: TranslationDataConfig, langs: Sequence[str]) -> Dict[str, List[Pair]]:
    """wmt14 / wmt16 (config de-en) from the Hugging Face hub: needs network or a populated cache."""
    import datasets

    names = {"train": "train", "valid": "validation", "test": "test", **dict(data.hub_splits or {})}
    try:
        ds = datasets.load_dataset(data.hub_name, data.hub_config)
    except Exception as err:  # noqa: BLE001 - offline, missing dataset ...: one message with the way out
        raise RuntimeError(f"task.data.source=hub: could not load {data.hub_name!r} ({data.hub_config}): "
                           f"{err}. It needs network access or a local cache; offline, use the default "
                           f"task.data.source=real or task.data.source=files") from None
    out = {}
    for split, name in names.items():
        rows = ds[name]
        limit = data.max_train_examples if split == "train" else None
        if limit:
            rows = rows.select(range(min(int(limit), len(rows))))
        out[split] = [{lang: ex["translation"][lang] for lang in langs} for ex in rows]
    return out


def load_pairs(data: TranslationDataConfig, langs: Sequence[str]) -> Dict[str, List[Pair]]:
    """Every split's sentence pairs for the source of the typed ``task.data`` section."""
    source = data.source
    cache_dir = Path(str(data.cache_dir)).expanduser()
    if source == "dictionary":
        if set(langs) != {"de", "en"}:
            raise ValueError(f"task.data.source=dictionary holds German-English pairs; task.src_lang/tgt_lang "
                             f"must be de and en, received {list(langs)}")
        splits = prepare_dictionary(data, cache_dir)
    elif source == "real":
        if set(langs) != {"de", "en"}:
            raise ValueError(f"task.data.source=real holds English-German pairs; task.src_lang/tgt_lang "
                             f"must be en and de, received {list(langs)}")
        splits = load_real(data, cache_dir, log=lambda m: print(m, flush=True))
    elif source == "files":
        splits = load_files(data, langs)
    elif source == "hub":
        splits = load_hub(data, langs)
    else:
        raise ValueError(f"task.data.source: expected real | dictionary | files | hub, received {source!r}")
    for split in SPLITS:
        if not splits.get(split):
            raise ValueError(f"task.data ({source}): the {split} split is empty")
    splits["train"] = cap_training_pairs(splits["train"], data.max_train_examples, int(data.split_seed))
    return splits


def cap_training_pairs(pairs: List[Pair], limit: Any, seed: int) -> List[Pair]:
    """At most ``limit`` training pairs (None: all): a fixed random subset (``seed``), kept in corpus order,
    so that a small CPU preset sees every source in proportion; validation and test stay whole."""
    if not limit or len(pairs) <= int(limit):
        return pairs
    keep = sorted(random.Random(seed).sample(range(len(pairs)), int(limit)))
    return [pairs[i] for i in keep]
