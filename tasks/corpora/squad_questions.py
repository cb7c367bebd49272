"""Offline SQuAD v1.1-format extractive QA generated from real prose (gensim's Wikipedia sample).

    paths = prepare_offline(cache_dir, wiki_path)     # {"train": .../train-v1.1.json, "valid": ..., "test": ...}

How a question is made (rule based, no NLP models): a sentence of a paragraph is chosen, a span of one
of five types is found in it by the patterns below, and replaced in place by a wh-phrase; the answer is
that span, with its character offset in the paragraph:

    date          "on 7 November 2012", "in May 1968"      -> "when"
    year          "in 1840"                                 -> "what year"
    number        "about 30 percent", "1,200 members"      -> "how many"
    name          capitalised word sequence ("Peter Kropotkin", "Bank of England") -> "who"
                  (the rules cannot tell people from places: "who" stands for any capitalised name)
    noun phrase   determiner + up to 3 content words ("the state") -> "what" (the determiner goes too)

e.g. "Proudhon wrote the book in 1840." -> "Proudhon wrote the book in what year?" answer "1840".
Articles (pages) are split 80/10/10 by a seeded shuffle, so no paragraph is in two splits. The result is
written as SQuAD v1.1 JSON and read back by the same loader as the real SQuAD files.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from tasks.corpora.wiki_prose import split_sentences, wiki_articles

GENERATOR_VERSION = 2  # bump when the rules change: the cache key changes with it
SPLIT_FILES = {"train": "train-v1.1.json", "valid": "dev-v1.1.json", "test": "test-v1.1.json"}

_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
PATTERNS = {
    "date": re.compile(rf"\b(?:\d{{1,2}} {_MONTH},? \d{{3,4}}|{_MONTH} \d{{1,2}}, \d{{3,4}}|{_MONTH} \d{{3,4}})\b"),
    "year": re.compile(r"(?<![\w.,$£€-])(?:1[0-9]{3}|20[0-2][0-9])(?![\w%-]|[.,]\d)"),
    "number": re.compile(r"(?<![\w.,$£€-])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w%-]|[.,]\d)"
                         r"|(?<![\w.,$£€-])\d+(?:\.\d+)?(?![\w%-]|[.,]\d)"),
    "name": re.compile(r"(?<![\w-])[A-Z][a-zà-ÿ]+(?:(?: | of | de | von | van | the | and |-)[A-Z][a-zà-ÿ]+)*(?![\w-])"),
    "noun_phrase": re.compile(r"(?<![\w-])(?:[Tt]he|[Aa]n?) ((?:[a-z][a-z-]+ ){0,2}[a-z][a-z-]+)(?![\w-])"),
}
WH = {"date": "when", "year": "what year", "number": "how many", "name": "who", "noun_phrase": "what"}
# words that do not start a name at a sentence start, nor belong to a noun phrase
FUNCTION_WORDS = set("""a an the and or but nor of in on at to for from by with without as is are was were be been
being has have had do does did not no this that these those it its he she they we you i his her their our my
your which who whom whose what when where why how than then there here also such some any all each every many
much more most other another one two three into onto over under after before during between among through about
against within upon while if so because although though since until unless however thus both either neither
can could may might must shall should will would very only just even still often usually generally later
early first second new old same own up down out off latter former around across along behind near
beyond toward towards via per like""".split())
TYPE_ORDER = ("date", "year", "number", "name", "noun_phrase")


def find_spans(sentence: str) -> List[Tuple[str, int, int, int, int]]:
    """Candidate answers ``(type, answer_start, answer_end, replace_start, replace_end)`` in ``sentence``;
    spans of an earlier type in TYPE_ORDER win over overlapping later ones (a date is not also a year)."""
    taken: List[Tuple[int, int]] = []
    found = []
    for kind in TYPE_ORDER:
        for m in PATTERNS[kind].finditer(sentence):
            rs, re_ = m.span()
            if kind == "noun_phrase":
                words = m.group(1).split()
                if any(w in FUNCTION_WORDS for w in words):
                    continue
                nxt = sentence[re_:].split(maxsplit=1)
                # the phrase must be complete, followed by a function word ("the state of ...") or the
                # sentence's end; before a comma it is most often an adjective ("a major, if not ...")
                if nxt and not (nxt[0] in (".", "?", "!") or nxt[0].lower() in FUNCTION_WORDS):
                    continue
                if words[-1].endswith(("ly", "ing", "ed")):  # adverbs and verb forms end a phrase badly
                    continue
                start, end = m.span(1)
            elif kind == "name":
                words = m.group().split()
                if rs == 0 and words[0].lower() in FUNCTION_WORDS:  # "The Bank" at a sentence start
                    rs += len(words[0]) + 1
                    words = words[1:]
                if rs == 0 and len(words) < 2:
                    continue  # a lone capitalised first word is most often not a name ("Lowercase letters")
                if not words or (len(words) == 1 and words[0].lower() in FUNCTION_WORDS):
                    continue
                start, end = rs, re_
            else:
                start, end = rs, re_
            if any(a < re_ and rs < b for a, b in taken):
                continue
            taken.append((rs, re_))
            found.append((kind, start, end, rs, re_))
    return found


def make_question(sentence: str, rs: int, re_: int, wh: str) -> str:
    """The sentence with [rs, re_) replaced by ``wh``, ending in a question mark."""
    head = sentence[:rs].rstrip()
    tail = sentence[re_:].strip()
    tail = tail[:-1].rstrip() if tail[-1:] in (".", "!", "?") else tail
    glue = "" if tail[:1] in (",", ";", ":", ")") or re.match(r"['’]s\b", tail) else " "  # "who's", "who,"
    question = f"{head} {wh if head else wh.capitalize()}{glue}{tail}"
    return re.sub(r"\s+", " ", question).strip().rstrip(",;:") + "?"


def chunk_paragraph(paragraph: str, max_words: int) -> List[str]:
    """Cut a long paragraph at sentence boundaries into contexts of at most ~``max_words`` words."""
    chunks, start, words = [], None, 0
    spans = split_sentences(paragraph)
    for s, e in spans:
        n = len(paragraph[s:e].split())
        if start is not None and words + n > max_words:
            chunks.append(paragraph[start:prev_end])
            start, words = None, 0
        if start is None:
            start = s
        words += n
        prev_end = e
    if start is not None:
        chunks.append(paragraph[start:prev_end])
    return chunks


def questions_for_context(context: str, rng: random.Random, per_context: int, type_counts: Dict[str, int],
                          min_words: int = 6, max_words: int = 45) -> List[Dict]:
    """Up to ``per_context`` questions, each from a different sentence. The answer type is the one the
    sentence offers that is rarest so far in ``type_counts`` (names are everywhere; dates and numbers
    would otherwise be a small minority), then a span of that type uniformly."""
    sentences = [(s, e) for s, e in split_sentences(context)
                 if min_words <= len(context[s:e].split()) <= max_words and context[s].isalnum()]
    rng.shuffle(sentences)
    qas = []
    for s, e in sentences:
        sentence = context[s:e]
        spans = [c for c in find_spans(sentence) if len(sentence[c[1]:c[2]].split()) <= 6]
        if not spans:
            continue
        kinds = sorted({c[0] for c in spans}, key=TYPE_ORDER.index)
        fewest = min(type_counts.get(k, 0) for k in kinds)
        kind = rng.choice([k for k in kinds if type_counts.get(k, 0) == fewest])
        type_counts[kind] = type_counts.get(kind, 0) + 1
        kind, a, b, rs, re_ = rng.choice([c for c in spans if c[0] == kind])
        question = make_question(sentence, rs, re_, WH[kind])
        if len(question.split()) < 4:
            continue
        qas.append({"question": question, "answers": [{"text": sentence[a:b], "answer_start": s + a}],
                    "type": kind})
        if len(qas) >= per_context:
            break
    return qas


def split_articles(titles: Sequence[str], fractions: Sequence[float], seed: int) -> Dict[str, str]:
    """title -> split, by a seeded shuffle of the titles (each article in exactly one split)."""
    order = sorted(titles)
    random.Random(seed).shuffle(order)
    n_valid = max(1, round(len(order) * fractions[1]))
    n_test = max(1, round(len(order) * fractions[2]))
    split = {}
    for i, title in enumerate(order):
        split[title] = "valid" if i < n_valid else "test" if i < n_valid + n_test else "train"
    return split


def generate(wiki_path: str, seed: int = 1234, fractions: Sequence[float] = (0.8, 0.1, 0.1),
             max_context_words: int = 120, questions_per_context: int = 3, max_articles: Optional[int] = None,
             progress: bool = True) -> Dict[str, Dict]:
    """SQuAD v1.1 dicts per split ({"version", "data": [{"title", "paragraphs": [{"context", "qas"}]}]})."""
    if len(fractions) != 3 or abs(sum(fractions) - 1) > 1e-6 or min(fractions) <= 0:
        raise ValueError(f"task.data.split_fractions: expected three positive numbers summing to 1, "
                         f"received {list(fractions)}")
    articles = []
    for title, paragraphs in wiki_articles(wiki_path):
        articles.append((title, paragraphs))
        if progress and len(articles) % 25 == 0:
            print(f"[squad] read {len(articles)} articles ...", flush=True)
        if max_articles and len(articles) >= max_articles:
            break
    if len(articles) < 3:
        raise ValueError(f"{wiki_path}: found {len(articles)} article(s) with prose paragraphs; "
                         f"need at least 3 (one per split)")
    assignment = split_articles([t for t, _ in articles], fractions, seed)
    out = {s: {"version": "1.1", "data": []} for s in SPLIT_FILES}
    for title, paragraphs in articles:
        # per article: an article's questions do not depend on which other articles were read
        rng, type_counts = random.Random(f"{seed}|{title}"), {}
        entry = {"title": title, "paragraphs": []}
        for p, paragraph in enumerate(paragraphs):
            for c, context in enumerate(chunk_paragraph(paragraph, max_context_words)):
                qas = questions_for_context(context, rng, questions_per_context, type_counts)
                for q, qa in enumerate(qas):
                    key = f"{title}|{p}|{c}|{q}|{qa['question']}".encode("utf-8")
                    qa["id"] = hashlib.md5(key).hexdigest()[:24]
                if qas:
                    entry["paragraphs"].append({"context": context, "qas": qas})
        if entry["paragraphs"]:
            out[assignment[title]]["data"].append(entry)
    return out


def prepare_offline(cache_dir: Path, wiki_path: str, params: Optional[Mapping] = None) -> Dict[str, Path]:
    """Generate the offline set once into ``cache_dir`` (keyed by the generator version and parameters)
    and return the SQuAD-format file of each split."""
    params = dict(params or {})
    key = hashlib.md5(json.dumps({"v": GENERATOR_VERSION, "wiki": Path(wiki_path).name, **params},
                                 sort_keys=True).encode()).hexdigest()[:10]
    folder = Path(cache_dir).expanduser() / f"wiki-generated-{key}"
    paths = {s: folder / name for s, name in SPLIT_FILES.items()}
    if all(p.is_file() for p in paths.values()):
        return paths
    print(f"[squad] generating SQuAD-format questions from {wiki_path} into {folder} (first use only)", flush=True)
    sets = generate(wiki_path, **params)
    folder.mkdir(parents=True, exist_ok=True)
    for split, path in paths.items():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sets[split], ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)  # atomic: a killed generation never leaves a half-written file that looks done
        n_q = sum(len(p["qas"]) for a in sets[split]["data"] for p in a["paragraphs"])
        print(f"[squad] {split}: {len(sets[split]['data'])} articles, {n_q:,} questions -> {path}", flush=True)
    return paths
