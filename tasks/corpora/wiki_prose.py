"""Plain-prose paragraphs from a MediaWiki XML dump (gensim's shortened English Wikipedia sample).

    for title, paragraphs in wiki_articles(path): ...     # main-namespace articles, redirects skipped
    sentences = split_sentences(paragraph)                # [(start, end)] character spans

Markup is stripped by rules (no parser dependency): comments, <ref>s and other tags, templates
``{{...}}`` and tables ``{|...|}`` (nested, innermost first), file/category links, ``[[target|label]]``
-> label, external links -> their label, bold/italic quotes. Only lines that read as running prose
survive: headings, lists, indented lines and anything still holding markup characters are dropped,
because a question generated from a half-stripped template would teach the reader nothing about text.
"""
from __future__ import annotations

import bz2
import gzip
import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator, List, Tuple

from tasks.engine.errors import not_a_file

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", re.S | re.I)
_TAG_BLOCK = re.compile(r"<(math|gallery|timeline|syntaxhighlight|source|pre|code|score)[^>]*>.*?</\1>", re.S | re.I)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_TABLE = re.compile(r"\{\|(?:(?!\{\|).)*?\|\}", re.S)
_LINK = re.compile(r"\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]")
_EXTERNAL = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]+(?:\s([^\]]*))?\]")
_NON_ARTICLE_LINK = re.compile(r"^\s*:?\s*(file|image|category|media|[a-z]{2,3}(-[a-z]+)?):", re.I)
_SPACES = re.compile(r"[ \t\u00a0]+")
# what must not be left in a prose paragraph (markup the rules above did not resolve)
_LEFTOVER = re.compile(r"[{}\[\]|<>=_]|&[a-z]+;|https?:")

# sentence boundary: . ! ? (optionally closing quote/bracket), space, then an upper-case letter or digit;
# not after common abbreviations or single initials ("J. R. R. Tolkien", "St. Louis", "e.g.")
_BOUNDARY = re.compile(r"[.!?][\"')\]]?\s+(?=[A-Z0-9\"'(])")
_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "col", "lt", "rev", "vs", "etc",
                  "e.g", "i.e", "no", "vol", "pp", "p", "ca", "c", "approx", "fig", "inc", "ltd", "co", "u.s",
                  "mt", "ft", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}


def _open_text(path: Path):
    opener = {".bz2": bz2.open, ".gz": gzip.open}.get(path.suffix, open)
    return opener(path, "rb")


def _replace_until_stable(pattern: re.Pattern, repl, text: str) -> str:
    while True:  # nested constructs: each pass removes the innermost level
        new = pattern.sub(repl, text)
        if new == text:
            return text
        text = new


def _link_label(match: re.Match) -> str:
    target, label = match.group(1), match.group(2)
    if _NON_ARTICLE_LINK.match(target):
        return ""  # [[File:x.jpg|thumb|caption]], [[Category:...]], interlanguage links
    return label if label is not None else target


def strip_markup(wikitext: str) -> str:
    """Wikitext -> text with the same line structure and no markup (best effort, rule based)."""
    text = html.unescape(wikitext)  # the dump escapes <ref> as &lt;ref&gt;
    text = _COMMENT.sub("", text)
    text = _REF.sub("", text)
    text = _TAG_BLOCK.sub("", text)
    text = _replace_until_stable(_TEMPLATE, "", text)
    text = _replace_until_stable(_TABLE, "", text)
    text = _replace_until_stable(_LINK, _link_label, text)
    text = _EXTERNAL.sub(lambda m: m.group(1) or "", text)
    text = _TAG.sub("", text)
    text = text.replace("'''", "").replace("''", "")
    return html.unescape(text)


def prose_paragraphs(wikitext: str, min_words: int = 25) -> List[str]:
    """Lines of running prose (at least ``min_words`` words, no leftover markup), whitespace collapsed."""
    paragraphs = []
    for line in strip_markup(wikitext).split("\n"):
        line = _SPACES.sub(" ", line).strip()
        if not line or line[0] in "*#:;|!={}" or _LEFTOVER.search(line):
            continue
        # parentheses left holding only punctuation once pronunciations/templates are gone: "(, )"
        line = re.sub(r"\(\s*[,;]+\s*", "(", line)
        line = re.sub(r"\s*[,;]+\s*\)", ")", line)
        line = re.sub(r"\s*\(\s*\)", "", line)
        line = re.sub(r"\s+([,.;:])", r"\1", line)
        line = _SPACES.sub(" ", line).strip()
        if len(line.split()) >= min_words and line[-1] in ".!?\"')":
            paragraphs.append(line)
    return paragraphs


def split_sentences(text: str) -> List[Tuple[int, int]]:
    """Character spans (start, end) of the sentences of ``text`` (rule based)."""
    spans, start = [], 0
    for m in _BOUNDARY.finditer(text):
        words = text[start:m.start()].split()
        last = words[-1].lower().rstrip(".") if words else ""
        if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue  # "Dr. Smith", "J. Smith": not a boundary
        spans.append((start, m.start() + len(m.group().rstrip())))  # keep the stop and a closing quote
        start = m.end()
    if start < len(text):
        spans.append((start, len(text.rstrip())))
    return [(s, e) for s, e in spans if e > s]


def wiki_articles(path: str, min_words: int = 25) -> Iterator[Tuple[str, List[str]]]:
    """(title, prose paragraphs) of each main-namespace, non-redirect page of a MediaWiki XML dump."""
    p = Path(path)
    if not p.is_file():
        raise not_a_file(p, "Wikipedia XML dump", "The offline SQuAD generator reads gensim's test data (pip "
                         "install gensim) or task.data.wiki_path=<dump.xml[.bz2]>")
    with _open_text(p) as f:
        for _, elem in ET.iterparse(f, events=("end",)):
            if not elem.tag.endswith("}page") and elem.tag != "page":
                continue
            ns = {c.tag.rsplit("}", 1)[-1]: c for c in elem}
            title = (ns["title"].text or "").strip() if "title" in ns else ""
            namespace = (ns["ns"].text or "0").strip() if "ns" in ns else "0"
            text_el = next((t for t in elem.iter() if t.tag.rsplit("}", 1)[-1] == "text"), None)
            text = text_el.text or "" if text_el is not None else ""
            elem.clear()
            if namespace != "0" or not title or "redirect" in ns or text.lstrip().upper().startswith("#REDIRECT"):
                continue
            paragraphs = prose_paragraphs(text, min_words)
            if paragraphs:
                yield title, paragraphs
