"""Offline SQuAD v1.1-format extractive QA with natural questions, generated from real prose (gensim's
Wikipedia sample).

    paths = prepare_offline(cache_dir, wiki_path)     # {"train": .../train-v1.1.json, "valid": ..., "test": ...}

Each paragraph (cut at sentence ends to about ``max_context_words``) is parsed by spaCy's en_core_web_md
(tasks/squad/parser.py); tasks/squad/generator/natural_questions.py turns each sentence into candidate questions
written as people ask them (wh-word first, inversion and do-support, subject questions, passive <-> active,
which + noun, how many / how long), the answer a span typed by NER and the parse. Malformed candidates are
dropped (``rejection``, ``copies_sentence``); of the rest, up to ``questions_per_context`` per paragraph are
kept, at most two per sentence, the construction rarest so far first. Articles (pages) are split 80/10/10
by a seeded shuffle, so no paragraph is in two splits. The result is written as SQuAD v1.1 JSON (each
question also carries its ``type`` = answer type and ``construction``) with ``stats.json`` beside it, and
read back by the same loader as the real SQuAD files. The regex span finder below serves the trivial
"first span of the asked type" baseline (tasks/squad/metrics.py).
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from tasks.corpora.wiki_prose import split_sentences, wiki_articles
from tasks.squad.generator.digests import article_digests
from tasks.squad.generator.pronouns import refer_back

GENERATOR_VERSION = 10  # bump when the rules change: the cache key changes with it
PROSE_SOURCES = ("wiki", "bbc")  # gensim's Wikipedia sample; BBC News (tasks/corpora/bbc_news.py)
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


@dataclass
class TitleTopic:
    """An article's title as the referent of a pronoun before the paragraph names anything ("It rises in ...")."""
    text: str
    label_: str


def title_topic(title: str, doc) -> Optional[TitleTopic]:
    """The title as a topic: a PERSON when a person named in the paragraph ends like it, else a thing."""
    if "(" in title or title.lower().startswith("list of") or not title[:1].isupper():
        return None
    last = title.split()[-1]
    person = any(e.label_ == "PERSON" and e.text.split()[-1] == last for e in doc.ents)
    return TitleTopic(title, "PERSON" if person else "TITLE")


def contexts_of(paragraphs: Sequence[str], max_words: int) -> List[str]:
    """Paragraphs cut at sentence ends to at most ~``max_words`` words, and neighbouring short ones joined up
    to that length (a news story's one-sentence paragraphs make a context of several sentences, where a
    pronoun can point back to a name)."""
    out: List[str] = []
    for paragraph in paragraphs:
        for chunk in chunk_paragraph(paragraph, max_words):
            if out and len(out[-1].split()) + len(chunk.split()) <= max_words:
                out[-1] = f"{out[-1]} {chunk}"
            else:
                out.append(chunk)
    return out


def questions_for_doc(doc, rng: random.Random, per_context: int, counts: Counter, stats: Counter,
                      min_words: int = 5, max_words: int = 40, topic: Optional[TitleTopic] = None,
                      skip_sentences: int = 0) -> List[Dict]:
    """Up to ``per_context`` questions about one parsed paragraph (at most two per sentence, none about its
    first ``skip_sentences``); ``topic``: what a pronoun refers to before the paragraph names a subject (a
    Wikipedia article's title)."""
    from tasks.squad.generator.natural_questions import SentenceQuestions
    from tasks.squad.generator.question_checks import copies_sentence, rejection
    topics, kept = ([topic] if topic else []), []
    for n, sent in enumerate(doc.sents):
        sq = SentenceQuestions(sent, topics, rng)
        if min_words <= len(sent) <= max_words and n >= skip_sentences:
            for c in sq.candidates():
                stats["candidates"] += 1
                answer = doc.text[c.answer_start:c.answer_end]
                why = rejection(c.question, answer, sent.text) or (
                    "copies_sentence" if copies_sentence(c.question, sent.text, answer) else None)
                stats[f"dropped_{why}" if why else "accepted"] += 1
                if not why:
                    kept.append((n, c))
        if sq.subject is not None and sq.subject.ent_type_ and sq.subject.lower_ not in ("he", "she", "it"):
            topics += [e for e in doc.ents if e.start <= sq.subject.i < e.end]
    rng.shuffle(kept)
    chosen, per_sentence = [], Counter()
    while kept and len(chosen) < per_context:
        fewest = min(counts[c.construction] for _, c in kept)
        n, c = next((n, c) for n, c in kept if counts[c.construction] == fewest)
        kept = [(m, d) for m, d in kept if d is not c and not (m == n and per_sentence[n] >= 1)]  # two per sentence at most
        per_sentence[n] += 1
        counts[c.construction] += 1
        chosen.append({"question": c.question, "answers": [{"text": doc.text[c.answer_start:c.answer_end],
                                                            "answer_start": c.answer_start}],
                       "type": c.answer_type, "construction": c.construction})
    return chosen


def generate(wiki_path: str, seed: int = 1234, fractions: Sequence[float] = (0.8, 0.1, 0.1),
             max_context_words: int = 120, questions_per_context: int = 4, max_articles: Optional[int] = None,
             prose: Sequence[str] = ("wiki",), progress: bool = True) -> Tuple[Dict[str, Dict], Dict]:
    """SQuAD v1.1 dicts per split ({"version", "data": [{"title", "paragraphs": [{"context", "qas"}]}]})
    and the corpus statistics (candidates, drops by reason, kept per construction and answer type)."""
    if len(fractions) != 3 or abs(sum(fractions) - 1) > 1e-6 or min(fractions) <= 0:
        raise ValueError(f"task.data.split_fractions: expected three positive numbers summing to 1, "
                         f"received {list(fractions)}")
    from tasks.squad.parser import load_parser
    articles = []
    for name in prose:
        if name not in PROSE_SOURCES:
            raise ValueError(f"task.data.prose: expected names from {list(PROSE_SOURCES)}, received {name!r}")
        if name == "wiki":
            read = wiki_articles(wiki_path)
        else:
            from tasks.corpora.bbc_news import bbc_articles
            read = bbc_articles()
        for n, (title, paragraphs) in enumerate(read):
            if max_articles and n >= max_articles:
                break
            articles.append((title, paragraphs, name))
    if len(articles) < 3:
        raise ValueError(f"{wiki_path}: found {len(articles)} article(s) with prose paragraphs; "
                         f"need at least 3 (one per split)")
    assignment = split_articles([t for t, _, _ in articles], fractions, seed)
    nlp, t0 = load_parser(), time.time()
    out = {s: {"version": "1.1", "data": []} for s in SPLIT_FILES}
    stats, seen = Counter(), {}
    for a, (title, paragraphs, source) in enumerate(articles):
        # per article: an article's questions do not depend on which other articles were read
        rng, counts = random.Random(f"{seed}|{title}"), Counter()
        contexts = list(enumerate(contexts_of(paragraphs, max_context_words)))
        entry, docs = {"title": title, "paragraphs": []}, []

        def add(key: str, text: str, qas: List[Dict]) -> None:
            for q, qa in enumerate(qas):
                qa["id"] = hashlib.md5(f"{title}|{key}|{q}|{qa['question']}".encode("utf-8")).hexdigest()[:24]
                stats[f"construction_{qa['construction']}"] += 1
                stats[f"answer_{qa['type']}"] += 1
            if qas:
                entry["paragraphs"].append({"context": text, "qas": qas})

        for (p, context), doc in zip(contexts, nlp.pipe([x[1] for x in contexts], batch_size=32)):
            if seen.setdefault(context, assignment[title]) != assignment[title]:
                stats["contexts_in_two_splits_skipped"] += 1  # the same paragraph in two articles
                continue
            docs.append(doc)
            topic = title_topic(title, doc) if source == "wiki" else None
            qas = questions_for_doc(doc, rng, questions_per_context, counts, stats, topic=topic)
            # later mentions of a named subject said as "it" / "he" / "the river" (tasks/squad/generator/pronouns.py), with
            # its own random stream, so the questions chosen above do not depend on it
            text, qas = refer_back(doc, qas, random.Random(f"{seed}|{title}|{p}|refer"))
            stats["contexts_referring_back"] += text != context
            stats["contexts"] += 1
            add(str(p), text, qas)
        if source == "wiki" and docs:  # short descriptions of the article's subject (tasks/squad/generator/digests.py)
            topic = title_topic(title, docs[0])
            digests = article_digests(title, docs, random.Random(f"{seed}|{title}|digest"),
                                      person=topic is not None and topic.label_ == "PERSON")
            for d, doc in enumerate(nlp.pipe(digests, batch_size=32)):
                # about the facts only: the first sentence is the article's own (asked about in its paragraph)
                qas = questions_for_doc(doc, rng, questions_per_context, counts, stats, topic=title_topic(title, doc),
                                        skip_sentences=1)
                stats["digests"] += 1
                add(f"digest{d}", doc.text, qas)
        if entry["paragraphs"]:
            out[assignment[title]]["data"].append(entry)
        if progress and (a + 1) % 100 == 0:
            print(f"[squad] parsed {a + 1}/{len(articles)} articles ({time.time() - t0:.0f}s, "
                  f"{stats['accepted']:,} of {stats['candidates']:,} candidates accepted)", flush=True)
    stats["kept"] = sum(v for k, v in stats.items() if k.startswith("construction_"))
    return out, dict(sorted(stats.items()))


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
    sets, stats = generate(wiki_path, **params)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stats.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
    for split, path in paths.items():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sets[split], ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)  # atomic: a killed generation never leaves a half-written file that looks done
        n_q = sum(len(p["qas"]) for a in sets[split]["data"] for p in a["paragraphs"])
        print(f"[squad] {split}: {len(sets[split]['data'])} articles, {n_q:,} questions -> {path}", flush=True)
    return paths
