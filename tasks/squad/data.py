"""SQuAD v1.1 data: read and validate the official JSON layout, tokenise with character offsets.

    examples = load_squad_file(path)        # [SquadExample], or SquadFormatError naming file + question id
    tokens, spans = tokenize(text)          # text[s:e] == token for every (s, e) in spans
    s_tok, e_tok = char_to_token_span(spans, answer_start, answer_end)

Layout (https://rajpurkar.github.io/SQuAD-explorer/, v1.1): {"version", "data": [{"title", "paragraphs":
[{"context", "qas": [{"id", "question", "answers": [{"text", "answer_start"}]}]}]}]}. Every question has
at least one answer and every answer text sits at its ``answer_start`` in the context; a file that breaks
this is refused with the file and the question id, because a silently misaligned answer would train on
the wrong span and make EM/F1 meaningless.

Sources (``task.data.source``): ``generated`` (default, offline: tasks/squad/generator/offline_corpus.py), ``files``
(local v1.1 JSON per split) and ``hub`` (Hugging Face ``squad``, needs network or a cache; converted
once to v1.1 JSON so its predictions can be rescored with the official script like any other file).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tasks.common.corpora import gensim_wiki_path
from tasks.engine.errors import not_a_file
from tasks.squad.schema import SquadDataConfig

SPLITS = ("train", "valid", "test")
SOURCES = ("generated", "files", "hub")

# numbers with separators stay whole ("1,200", "109.5"); possessive 's is its own token (an answer
# "Portuguese Angola" must end where "'s" starts); hyphenated words stay whole; any other symbol alone
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|\w+(?:-\w+)*(?=['’]s\b)|['’]s\b|\w+(?:-\w+)*|[^\w\s]")


class SquadFormatError(ValueError):
    """A SQuAD file that does not follow the v1.1 layout; the message names the file and question id."""


@dataclass
class SquadExample:
    qid: str
    title: str
    context: str
    question: str
    answers: List[str]
    answer_starts: List[int]
    extra: Dict[str, Any] = field(default_factory=dict)  # e.g. the generator's answer "type"


def tokenize(text: str) -> Tuple[List[str], List[Tuple[int, int]]]:
    """Tokens and their character spans in ``text`` (so a token span maps back to an exact substring)."""
    tokens, spans = [], []
    for m in _TOKEN.finditer(text):
        tokens.append(m.group())
        spans.append(m.span())
    return tokens, spans


def char_to_token_span(spans: Sequence[Tuple[int, int]], start: int, end: int) -> Optional[Tuple[int, int]]:
    """First and last token overlapping characters [start, end); None when no token does."""
    first = next((i for i, (s, e) in enumerate(spans) if e > start), None)
    if first is None or spans[first][0] >= end:
        return None
    last = first
    while last + 1 < len(spans) and spans[last + 1][0] < end:
        last += 1
    return first, last


def _fail(path: Any, where: str, problem: str) -> None:
    raise SquadFormatError(f"{path}: {where}: {problem}. Expected the SQuAD v1.1 layout "
                           f"(data -> paragraphs -> context, qas -> id, question, answers -> text, answer_start).")


def parse_squad(obj: Any, path: Any = "<squad json>", need_answers: bool = True) -> List[SquadExample]:
    """Validate a loaded v1.1 JSON object and flatten it into one example per question.
    ``need_answers=False`` (predict.py): questions without answers are read too (nothing is scored)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        _fail(path, "top level", 'expected an object with a "data" list')
    examples: List[SquadExample] = []
    seen: Dict[str, str] = {}
    for a, article in enumerate(obj["data"]):
        title = str(article.get("title", f"article {a}")) if isinstance(article, dict) else ""
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            _fail(path, f"article {a} ({title!r})", 'expected a "paragraphs" list')
        for p, paragraph in enumerate(article["paragraphs"]):
            where = f"article {title!r}, paragraph {p}"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                _fail(path, where, 'expected a "context" string')
            if not isinstance(paragraph.get("qas"), list):
                _fail(path, where, 'expected a "qas" list')
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                qid = qa.get("id") if isinstance(qa, dict) else None
                if not isinstance(qid, str) or not qid:
                    _fail(path, where, f'a question without an "id" string ({str(qa)[:80]})')
                here = f"question id {qid!r} ({where})"
                if qid in seen:
                    _fail(path, here, f"the id is used twice (also in {seen[qid]})")
                seen[qid] = where
                if not isinstance(qa.get("question"), str) or not qa["question"].strip():
                    _fail(path, here, 'missing or empty "question"')
                answers = qa.get("answers")
                if not need_answers and not answers:
                    answers = []
                elif not isinstance(answers, list) or not answers:
                    _fail(path, here, 'missing or empty "answers" (v1.1 questions all have an answer)')
                texts, starts = [], []
                for answer in answers:
                    text = answer.get("text") if isinstance(answer, dict) else None
                    start = answer.get("answer_start") if isinstance(answer, dict) else None
                    if not isinstance(text, str) or not text:
                        _fail(path, here, f'an answer without a "text" string ({answer!r})')
                    if not isinstance(start, int) or isinstance(start, bool):
                        _fail(path, here, f'answer {text!r} has no integer "answer_start" ({start!r})')
                    if not 0 <= start < len(context) or start + len(text) > len(context):
                        _fail(path, here, f"answer_start {start} of answer {text!r} is outside the context "
                                          f"({len(context)} characters)")
                    if context[start:start + len(text)] != text:
                        _fail(path, here, f"answer text {text!r} is not at answer_start {start} (the context there "
                                          f"reads {context[start:start + len(text)]!r})")
                    texts.append(text)
                    starts.append(start)
                extra = {k: v for k, v in qa.items() if k not in ("id", "question", "answers")}
                if not context.strip():
                    _fail(path, here, 'empty "context"')
                examples.append(SquadExample(qid, title, context, qa["question"], texts or [""], starts or [0],
                                             extra))
    return examples


def load_squad_file(path: Any) -> List[SquadExample]:
    p = Path(os.path.expanduser(str(path)))
    if not p.is_file():
        raise not_a_file(p.resolve(), "SQuAD file", "Fix task.data.files.<split> or use the offline default "
                         "task.data.source=generated.")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise SquadFormatError(f"{p}: not valid JSON ({err}); expected a SQuAD v1.1 file") from None
    return parse_squad(obj, p)


def human_check_path(path: Any) -> Path:
    """``task.human_check``: an absolute path, one relative to the working directory, or else to the repository
    root (the committed tasks/squad/human_dev-v1.1.json wherever the run starts)."""
    p = Path(os.path.expanduser(str(path)))
    if not p.is_absolute() and not p.is_file():
        p = Path(__file__).resolve().parents[2] / p
    return p


def cache_root(cache_dir: Optional[str]) -> Path:
    """Where generated / converted files are kept: ``task.data.cache_dir``; null: $SRU_CACHE/squad."""
    root = cache_dir or os.path.join(
        os.environ.get("SRU_CACHE", os.path.expanduser("~/.cache/sru-experiments")), "squad")
    return Path(os.path.expanduser(str(root)))


def split_files(data: SquadDataConfig, needed: Sequence[str] = SPLITS) -> Dict[str, Path]:
    """The SQuAD v1.1 JSON file of each split for the typed ``task.data`` section's source (generated/converted
    on first use); ``files``: only the ``needed`` splits must be given (evaluate.py scores one file)."""
    source = data.source
    if source == "generated":
        from tasks.squad.generator.offline_corpus import prepare_offline
        wiki = data.wiki_path
        if not wiki:
            wiki = gensim_wiki_path()
        params = {"seed": data.seed, "max_context_words": data.max_context_words,
                  "questions_per_context": data.questions_per_context}
        params["fractions"] = list(data.split_fractions)
        params["prose"] = list(data.prose)
        return prepare_offline(cache_root(data.cache_dir), str(wiki), params)
    if source == "files":
        files = {s: getattr(data.files, s) for s in SPLITS}
        files["test"] = files["test"] or files["valid"]
        missing = [s for s in needed if not files.get(s)]
        if missing:
            raise ValueError(f"task.data.source=files: expected task.data.files.{missing[0]} "
                             "(SQuAD v1.1 JSON, e.g. train-v1.1.json / dev-v1.1.json); test defaults to valid")
        return {s: Path(os.path.expanduser(str(files[s]))) for s in needed}
    if source == "hub":
        return _hub_to_files(data)
    raise ValueError(f"task.data.source: expected one of {list(SOURCES)}, received {source!r}")


def _hub_to_files(data: SquadDataConfig) -> Dict[str, Path]:
    """Convert the hub's flat rows (id, title, context, question, answers{text, answer_start}) to v1.1 JSON."""
    name, config = data.hub_name, data.hub_config
    names = dict(data.hub_splits)
    folder = cache_root(data.cache_dir) / f"hub-{re.sub(r'[^A-Za-z0-9_.-]', '_', f'{name}-{config}')}"
    paths = {s: folder / f"{names[s]}-v1.1.json" for s in SPLITS}
    if all(p.is_file() for p in paths.values()):
        return paths
    try:
        import datasets
        ds = datasets.load_dataset(name, config)
    except Exception as err:  # offline without a cache, a wrong name ...
        raise RuntimeError(f"task.data.source=hub: could not load {name!r} ({type(err).__name__}: {err}). It needs "
                           f"network access or a local cache; offline use task.data.source=generated or "
                           f"task.data.source=files with local SQuAD v1.1 JSON.") from None
    folder.mkdir(parents=True, exist_ok=True)
    for split, hub_split in names.items():
        if hub_split not in ds:
            raise ValueError(f"task.data.hub_splits.{split}={hub_split!r}: {name} has splits {list(ds)}")
        articles: Dict[str, Dict[str, Any]] = {}
        for row in ds[hub_split]:
            article = articles.setdefault(row["title"], {"title": row["title"], "paragraphs": {}})
            paragraph = article["paragraphs"].setdefault(row["context"], {"context": row["context"], "qas": []})
            answers = [{"text": t, "answer_start": int(s)}
                       for t, s in zip(row["answers"]["text"], row["answers"]["answer_start"])]
            paragraph["qas"].append({"id": row["id"], "question": row["question"], "answers": answers})
        data = [{"title": a["title"], "paragraphs": list(a["paragraphs"].values())} for a in articles.values()]
        paths[split].write_text(json.dumps({"version": "1.1", "data": data}, ensure_ascii=False), encoding="utf-8")
    return paths
