"""The offline English-German corpus of real human translations (``task.data.source=real``, the default).

Built from whichever of these Debian packages are installed (``parallel_text.py`` reads their formats):

    libreoffice   LibreOffice help pages, aligned by par_id / hd_id   libreoffice-help-en-us libreoffice-help-de  MPL-2.0
    gnome         GNOME help (Mallard pages), block by block            gnome-user-docs                             CC-BY-SA-3.0
    fillets       Fish Fillets game dialogue, line by line              fillets-ng-data                             GPL-2+
    dictionary    example sentences of the Ding De-En dictionary        trans-de-en                                 GPL-2+
                  (everyday phrases: besides the capped share in the split, ``real.train_extra`` more for train only)

Steps: read documents -> clean and filter every pair (``parallel_text.keep_pair``) -> deduplicate on normalised
text across the whole corpus (``parallel_text.dedupe``) -> split by document per source (``parallel_text.split_by_document``)
-> measure the overlap that remains between test/valid and train (verbatim and near-duplicates).
Cached under ``cache_dir/real-<key>/`` as plain text, one sentence a line: ``<split>.en``, ``<split>.de``,
``<split>.source`` (which package) and ``<split>.doc`` (which document), plus ``stats.json``.

``data`` below is the typed ``task.data`` section (tasks/translation/schema.py: TranslationDataConfig, its
``real`` a RealCorpusConfig), read by attribute; not imported here, as the corpora import no task.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from collections import Counter, defaultdict
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from tasks.corpora.parallel_text import (Document, dedupe, keep_pair, normalise, read_fillets, read_gnome,
                                      read_libreoffice, split_by_document)
from tasks.corpora.ding import cache_key, pairs_from_ding_line

SPLITS = ("train", "valid", "test")
PACKAGES = {"libreoffice": "libreoffice-help-en-us libreoffice-help-de", "gnome": "gnome-user-docs",
            "fillets": "fillets-ng-data", "dictionary": "trans-de-en"}
REAL_HINT = "apt-get install " + " ".join(PACKAGES.values())
NEAR_DUPLICATE = 0.9   # difflib similarity of two normalised sentences at or above which they count as near-duplicates


def _roots(real: Any, dictionary_path: str) -> Dict[str, List[Path]]:
    """The files or folders each source reads; a source is installed when all of them exist."""
    lo = Path(str(real.libreoffice_help)).expanduser()
    return {"libreoffice": [lo / "en-US", lo / "de"],
            "gnome": [Path(str(real.gnome_help)).expanduser() / "C", Path(str(real.gnome_help)).expanduser() / "de"],
            "fillets": [Path(str(real.fillets_scripts)).expanduser()],
            "dictionary": [Path(dictionary_path).expanduser()]}


def _fingerprint(paths: Sequence[Path]) -> List[Any]:
    """Size and mtime of every file under the paths: the cache follows package upgrades."""
    out = []
    for p in paths:
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
        out.append([str(p), len(files), sum(f.stat().st_size for f in files), max((int(f.stat().st_mtime) for f in files), default=0)])
    return out


def read_dictionary_documents(path: Path, block_lines: int, min_words: int) -> Iterator[Document]:
    """The Ding dictionary in blocks of ``block_lines`` consecutive lines (entries are sorted by headword,
    so neighbouring lines share words: a block is the unit of the split, like a page)."""
    with Path(path).open(encoding="utf-8") as f:
        lines = f.readlines()
    for start in range(0, len(lines), block_lines):
        pairs = [(en, de) for line in lines[start:start + block_lines] for de, en in pairs_from_ding_line(line, min_words)]
        yield Document("dictionary", f"lines {start + 1}-{start + block_lines}", pairs)


def read_documents(source: str, roots: List[Path], real: Any, min_words_dictionary: int,
                   skipped: List[str]) -> Iterator[Document]:
    if source == "libreoffice":
        return read_libreoffice(*roots)
    if source == "gnome":
        return read_gnome(roots[0].parent, skipped)
    if source == "fillets":
        return read_fillets(roots[0])
    if source == "dictionary":
        return read_dictionary_documents(roots[0], int(real.dictionary_block_lines), min_words_dictionary)
    raise ValueError(f"task.data.real.sources: unknown source {source!r}; expected some of {list(PACKAGES)}")


def sample_documents(docs: List[Document], max_pairs: Optional[int], seed: str) -> List[Document]:
    """Whole documents drawn at random (``seed``) until about ``max_pairs`` pairs (None: all), kept in order."""
    return split_sample(docs, max_pairs, seed)[0]


def split_sample(docs: List[Document], max_pairs: Optional[int], seed: str) -> Tuple[List[Document], List[Document]]:
    """``sample_documents``'s choice and the documents it left out (in the order drawn, so a further cap on
    them takes the next ones of the same draw)."""
    if not max_pairs or sum(len(d.pairs) for d in docs) <= max_pairs:
        return docs, []
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    chosen, total = set(), 0
    for i in order:
        if total >= max_pairs:
            break
        chosen.add(i)
        total += len(docs[i].pairs)
    return [d for i, d in enumerate(docs) if i in chosen], [docs[i] for i in order if i not in chosen]


def train_only_documents(left_out: List[Document], extra_pairs: Optional[int]) -> List[Document]:
    """About ``extra_pairs`` pairs (whole documents, None or 0: none) of what the cap left out, for train only:
    more of the source to learn from while valid and test keep the capped share (and stay the same sets)."""
    if not extra_pairs:
        return []
    return sample_documents_in_order(left_out, int(extra_pairs))


def sample_documents_in_order(docs: List[Document], max_pairs: int) -> List[Document]:
    chosen, total = [], 0
    for doc in docs:
        if total >= max_pairs:
            break
        chosen.append(doc)
        total += len(doc.pairs)
    return chosen


# ---- overlap between splits --------------------------------------------------------------------------
def near_duplicates(queries: Sequence[str], pool: Sequence[str], threshold: float = NEAR_DUPLICATE,
                    candidates: int = 100) -> int:
    """How many ``queries`` have a ``pool`` sentence with difflib similarity >= threshold (both normalised).
    Candidates share the query's two rarest words (an exhaustive comparison would be quadratic)."""
    pool_keys = [normalise(s) for s in pool]
    postings: Dict[str, List[int]] = defaultdict(list)
    for i, key in enumerate(pool_keys):
        for word in set(key.split()):
            postings[word].append(i)
    found = 0
    for query in queries:
        key = normalise(query)
        words = sorted(set(key.split()), key=lambda w: len(postings.get(w, ())))
        cands = {i for w in words[:2] for i in postings.get(w, ())[:candidates]}
        for i in cands:
            other = pool_keys[i]
            if min(len(key), len(other)) < threshold * max(len(key), len(other)):
                continue  # the lengths alone rule it out
            matcher = SequenceMatcher(None, key, other, autojunk=False)
            if matcher.quick_ratio() >= threshold and matcher.ratio() >= threshold:
                found += 1
                break
    return found


def overlap_report(splits: Mapping[str, Sequence[Tuple[str, str, str, str]]]) -> Dict[str, Dict[str, int]]:
    """For valid and test: pairs whose English / German occurs verbatim in train, and near-duplicates."""
    train_en = {p[0] for p in splits["train"]}
    train_de = {p[1] for p in splits["train"]}
    train_de_list = [p[1] for p in splits["train"]]
    report = {}
    for split in ("valid", "test"):
        rows = splits[split]
        report[split] = {"pairs": len(rows),
                         "en_verbatim_in_train": sum(p[0] in train_en for p in rows),
                         "de_verbatim_in_train": sum(p[1] in train_de for p in rows),
                         f"de_near_duplicate_in_train_{NEAR_DUPLICATE}": near_duplicates([p[1] for p in rows], train_de_list)}
    return report


# ---- the prepare step ---------------------------------------------------------------------------------
def build_corpus(data: Any, log=print) -> Tuple[Dict[str, List[Tuple[str, str, str, str]]], Dict[str, Any]]:
    """Rows (en, de, source, doc) per split and the statistics, from the installed packages (``data``: the
    typed ``task.data`` section)."""
    real = data.real
    roots = _roots(real, str(data.dictionary_path))
    wanted = list(real.sources)
    unknown = [s for s in wanted if s not in PACKAGES]
    if unknown:
        raise ValueError(f"task.data.real.sources: unknown {unknown}; expected some of {list(PACKAGES)}")
    installed = [s for s in wanted if all(p.exists() for p in roots[s])]
    missing = [s for s in wanted if s not in installed]
    if not installed:
        raise FileNotFoundError(f"task.data.source=real: none of its Debian packages is installed (looked for "
                                f"{[str(p) for s in wanted for p in roots[s]]}). Install them with: {REAL_HINT}")
    if missing:
        log(f"[translation] real corpus without {missing} (not installed); for the full corpus: "
            f"apt-get install {' '.join(PACKAGES[s] for s in missing)}")
    min_words, max_words = int(real.min_words), int(real.max_words)
    documents, read_counts, kept_counts, skipped, extra = [], Counter(), Counter(), [], []
    caps, extra_caps = dict(real.max_pairs or {}), dict(real.train_extra or {})
    for source in installed:
        t0 = time.time()
        docs = []
        for doc in read_documents(source, roots[source], real, int(data.min_words), skipped):
            read_counts[source] += len(doc.pairs)
            doc.pairs = [p for p in doc.pairs if keep_pair(p[0], p[1], min_words, max_words)]
            kept_counts[source] += len(doc.pairs)
            docs.append(doc)
        chosen, left_out = split_sample(docs, caps.get(source), f"{data.split_seed}:{source}")
        documents.extend(chosen)
        extra.extend(train_only_documents(left_out, extra_caps.get(source)))
        log(f"[translation] {source}: {read_counts[source]:,} aligned pairs, {kept_counts[source]:,} after cleaning "
            f"({time.time() - t0:.1f}s)")
    # the train-only documents come last, so a sentence they share with the split's documents stays there
    documents, removed = dedupe(documents + [Document(d.source, "train-only " + d.doc_id, d.pairs) for d in extra])
    extra = [d for d in documents if d.doc_id.startswith("train-only ")]
    documents = [d for d in documents if not d.doc_id.startswith("train-only ")]
    unique, unique_extra = Counter(), Counter()
    for doc in documents:
        unique[doc.source] += len(doc.pairs)
    for doc in extra:
        unique_extra[doc.source] += len(doc.pairs)
    sizes = {s: (max(int(real.min_valid), round(float(real.valid_fraction) * n)),
                 max(int(real.min_test), round(float(real.test_fraction) * n))) for s, n in unique.items()}
    by_split = split_by_document(documents, sizes, int(data.split_seed))
    by_split["train"] += extra
    rows = {split: [(en, de, d.source, d.doc_id) for d in docs for en, de in d.pairs] for split, docs in by_split.items()}
    stats: Dict[str, Any] = {
        "sources": installed, "missing": missing, "gnome_pages_skipped": len(skipped),
        "aligned": dict(read_counts), "after_cleaning": dict(kept_counts), "max_pairs": caps, "after_dedupe": dict(unique),
        "train_extra": extra_caps, "train_extra_after_dedupe": dict(unique_extra),
        "removed_by_dedupe": removed, "per_split": {}, "overlap": overlap_report(rows),
        "settings": {"min_words": min_words, "max_words": max_words, "split_seed": int(data.split_seed)}}
    for split, docs in by_split.items():
        for source in installed:
            mine = [d for d in docs if d.source == source]
            stats["per_split"].setdefault(source, {})[split] = {
                "documents": len(mine), "pairs": sum(len(d.pairs) for d in mine),
                "en_words": sum(len(en.split()) for d in mine for en, _ in d.pairs),
                "de_words": sum(len(de.split()) for d in mine for _, de in d.pairs)}
    return rows, stats


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line.replace("\n", " ") + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)   # atomic: an interrupted prepare never leaves half a file in the cache


def corpus_folder(data: Any, cache_dir: Path) -> Path:
    real = data.real
    roots = _roots(real, str(data.dictionary_path))
    present = [s for s in real.sources if s in roots and all(p.exists() for p in roots[s])]
    settings = {f.name: getattr(real, f.name) for f in dataclasses.fields(real)  # the paths: in the fingerprints
                if f.name not in ("libreoffice_help", "gnome_help", "fillets_scripts")}
    key = cache_key([_fingerprint(roots[s]) for s in present], settings, data.split_seed, data.min_words, 1)
    return cache_dir / f"real-{key}"


def prepare_real(data: Any, cache_dir: Path, log=print) -> Path:
    """The corpus folder, built on first use (the whole step takes well under a minute)."""
    folder = corpus_folder(data, cache_dir)
    if (folder / "stats.json").is_file():
        return folder
    t0 = time.time()
    log(f"[translation] building the real En-De corpus (first use; cached in {folder}) ...")
    rows, stats = build_corpus(data, log)
    folder.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        for column, suffix in enumerate(("en", "de", "source", "doc")):
            _write_lines(folder / f"{split}.{suffix}", [r[column] for r in rows[split]])
    (folder / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")   # last: marks the folder complete
    log(f"[translation] corpus ready in {time.time() - t0:.1f}s: {format_stats(stats)}")
    return folder


def load_real(data: Any, cache_dir: Path, log=print) -> Dict[str, List[Dict[str, str]]]:
    """Every split as ``{"en", "de", "domain"}`` pairs, read from the cached plain text files."""
    folder = prepare_real(data, cache_dir, log)
    out = {}
    for split in SPLITS:
        columns = {suffix: (folder / f"{split}.{suffix}").read_text(encoding="utf-8").splitlines()
                   for suffix in ("en", "de", "source")}
        out[split] = [{"en": en, "de": de, "domain": src}
                      for en, de, src in zip(columns["en"], columns["de"], columns["source"])]
    log(f"[translation] real corpus files: {folder}/{{train,valid,test}}.{{en,de,source,doc}} (stats: {folder / 'stats.json'})")
    return out


def format_stats(stats: Mapping[str, Any]) -> str:
    parts = []
    for source, per in stats["per_split"].items():
        parts.append(f"{source} " + "/".join(f"{per[s]['pairs']:,}" for s in SPLITS))
    test = stats["overlap"]["test"]
    return (f"pairs train/valid/test: {'; '.join(parts)}; {stats['removed_by_dedupe']:,} duplicates removed; "
            f"test targets verbatim in train: {test['de_verbatim_in_train']}")
