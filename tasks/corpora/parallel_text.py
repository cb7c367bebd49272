"""Parallel English-German text from the formats of three Debian packages, and the corpus-wide steps.

Readers (each yields ``Document``s: an id and its aligned ``(en, de)`` segment pairs):
- LibreOffice help (``libreoffice-help-en-us`` / ``libreoffice-help-de``): one HTML page per file, the same
  relative path in both languages; every paragraph and heading carries the same ``id="par_id…"`` /
  ``id="hd_id…"`` in both, so segments align exactly by id. Hidden alternatives (``hidden="true"``: the
  macOS key names of a switch) and code paragraphs are left out.
- GNOME help (``gnome-user-docs``): Mallard ``.page`` XML, ``C/`` (English) and ``de/``. A translated page
  keeps the English block structure, so the sequence of text blocks (title, desc, p, ...) aligns one to one;
  a page whose block sequences differ (tag by tag) is skipped rather than guessed.
- The Fish Fillets game (``fillets-ng-data``): ``<level>/dialogs_de.lua`` holds
  ``dialogId("<id>", "<font>", "<English>")`` followed by ``dialogStr("<German>")``, read by
  ``fillets_dialogs.parse_dialogs`` (the speech corpus reads the Czech and Dutch files with it).
(The Ding dictionary reader is ``ding.pairs_from_ding_line``; its documents are blocks of lines.)

Corpus-wide steps: ``clean_segment`` (markup is gone already; placeholders, whitespace), ``keep_pair``
(empty / identical / garbled / too long), ``dedupe`` on normalised text (case, punctuation, digits and
spacing ignored, either language), and ``split_by_document`` (whole documents go to one split).
"""
from __future__ import annotations

import random
import re
import unicodedata
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from tasks.corpora.fillets_dialogs import parse_dialogs

Segment = Tuple[str, str]   # (English, German)


@dataclass
class Document:
    """One unit of the document split: a help page, a game level, a block of dictionary lines."""
    source: str              # libreoffice | gnome | fillets | dictionary
    doc_id: str
    pairs: List[Segment] = field(default_factory=list)


# ---- cleaning ----------------------------------------------------------------------------------------
# LibreOffice help still holds a few unexpanded product-name variables; the shipped help shows "LibreOffice"
_PLACEHOLDERS = re.compile(r"\$\[officename\]|%PRODUCTNAME|\$\[officeversion\]|%PRODUCTVERSION")
_INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")   # soft hyphen, zero-width characters
_SPACES = re.compile(r"\s+")
_NOT_LETTERS = re.compile(r"[\W\d_]+")


def clean_segment(text: str) -> str:
    """NFC, product-name placeholders expanded, invisible characters dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFC", text)
    text = _PLACEHOLDERS.sub(lambda m: "LibreOffice" if "NAME" in m.group().upper() else "", text)
    text = _INVISIBLE.sub("", text)
    return _SPACES.sub(" ", text).strip()


def normalise(text: str) -> str:
    """The deduplication key: case-folded letters only, so variants in case, punctuation, digits
    ("Step 1" / "Step 2") and spacing count as one sentence."""
    return _NOT_LETTERS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def keep_pair(en: str, de: str, min_words: int, max_words: int, max_ratio: float = 3.0) -> bool:
    """Drop empty, untranslated (identical after normalisation), garbled and out-of-range pairs."""
    key_en, key_de = normalise(en), normalise(de)
    if not key_en or not key_de or key_en == key_de:
        return False
    if "\ufffd" in en or "\ufffd" in de:   # broken encoding
        return False
    n_en, n_de = len(en.split()), len(de.split())
    if not (min_words <= n_en <= max_words and min_words <= n_de <= max_words):
        return False
    # garbled alignment: one side far longer than the other (in characters; short labels are exempt)
    long, short = max(len(en), len(de)), min(len(en), len(de))
    return long < 20 or long <= max_ratio * short


def dedupe(documents: Iterable[Document]) -> Tuple[List[Document], int]:
    """Keep the first pair of every normalised English and every normalised German sentence (documents
    in the given order), so the same or a trivially different sentence can never sit in two splits.
    Returns the documents (empty ones dropped) and the number of pairs removed."""
    seen_en, seen_de, removed, out = set(), set(), 0, []
    for doc in documents:
        kept = []
        for en, de in doc.pairs:
            key_en, key_de = normalise(en), normalise(de)
            if key_en in seen_en or key_de in seen_de:
                removed += 1
                continue
            seen_en.add(key_en)
            seen_de.add(key_de)
            kept.append((en, de))
        if kept:
            out.append(Document(doc.source, doc.doc_id, kept))
    return out, removed


def split_by_document(documents: Sequence[Document], sizes: Mapping[str, Tuple[int, int]],
                      seed: int) -> Dict[str, List[Document]]:
    """Per source, shuffle its documents (``seed``) and fill test, then valid, with whole documents until
    each holds at least ``sizes[source] = (valid_pairs, test_pairs)`` pairs; the rest is train."""
    splits: Dict[str, List[Document]] = {"train": [], "valid": [], "test": []}
    by_source: Dict[str, List[Document]] = {}
    for doc in documents:
        by_source.setdefault(doc.source, []).append(doc)
    for source in sorted(by_source):
        docs = sorted(by_source[source], key=lambda d: d.doc_id)
        random.Random(f"{seed}:{source}").shuffle(docs)
        valid_size, test_size = sizes[source]
        filled = {"test": 0, "valid": 0}
        for doc in docs:
            split = next((s for s, want in (("test", test_size), ("valid", valid_size)) if filled[s] < want), "train")
            if split != "train":
                filled[split] += len(doc.pairs)
            splits[split].append(doc)
    return splits


# ---- LibreOffice help (HTML) -------------------------------------------------------------------------
_SEGMENT_ID = re.compile(r"^(par|hd)_id\w+$")
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_SKIP_CLASSES = {"code", "codeintable", "smathcode", "bascode"}   # program text, not language


class _HelpPageParser(HTMLParser):
    """Text of every element whose id is par_id…/hd_id…, hidden subtrees and code left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.segments: Dict[str, str] = {}
        self.stack: List[Tuple[str, bool, Optional[str]]] = []   # (tag, hidden, segment id it opened)
        self.current: Optional[str] = None
        self.parts: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        if tag in _VOID:
            if tag == "br" and self.current:
                self.parts.append(" ")
            return
        a = dict(attrs)
        # a switch holds hidden variants (MAC, WRITER, CALC, ..., default) of which the page's script shows
        # one: keep the "default…" variant, the one shown on Linux outside a module-specific context
        variant_hidden = a.get("hidden") is not None and not (a.get("id") or "").startswith("default")
        hidden = (self.stack and self.stack[-1][1]) or variant_hidden
        hidden = hidden or bool(_SKIP_CLASSES & set((a.get("class") or "").split()))
        opened = None
        if self.current is None and not hidden and _SEGMENT_ID.match(a.get("id") or ""):
            opened = self.current = a["id"]
            self.parts = []
        self.stack.append((tag, bool(hidden), opened))

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or not any(t == tag for t, _, _ in self.stack):
            return   # stray end tag: ignore rather than unwind the stack
        while self.stack:
            t, _, opened = self.stack.pop()
            if opened is not None:
                self.segments.setdefault(opened, "".join(self.parts))   # an id twice on a page: first wins
                self.current = None
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.current is not None and not (self.stack and self.stack[-1][1]):
            self.parts.append(data)


def help_page_segments(html: str) -> Dict[str, str]:
    """id -> cleaned text of one LibreOffice help page."""
    parser = _HelpPageParser()
    parser.feed(html)
    parser.close()
    return {k: clean_segment(v) for k, v in parser.segments.items()}


def align_help_pages(en_html: str, de_html: str) -> List[Segment]:
    """Segment pairs of one page in both languages, in the English page's order, matched by id."""
    en, de = help_page_segments(en_html), help_page_segments(de_html)
    return [(text, de[i]) for i, text in en.items() if i in de]


def read_libreoffice(en_root: Path, de_root: Path) -> Iterator[Document]:
    """One document per page present in both languages (``<root>/text/**/*.html``)."""
    for en_path in sorted(Path(en_root).glob("text/**/*.html")):
        rel = en_path.relative_to(en_root)
        de_path = Path(de_root) / rel
        if de_path.is_file():
            pairs = align_help_pages(en_path.read_text(encoding="utf-8", errors="replace"),
                                     de_path.read_text(encoding="utf-8", errors="replace"))
            yield Document("libreoffice", str(rel.with_suffix("")), pairs)


# ---- GNOME help (Mallard) ----------------------------------------------------------------------------
_BLOCKS = {"title", "subtitle", "desc", "p"}   # the text blocks of Mallard 1.0 (list items, cells hold p)
_NO_TEXT = {"media", "screen", "code", "credit", "license", "revision"}   # program text, names, metadata
_ITS_TRANSLATE = "{http://www.w3.org/2005/11/its}translate"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _block_text(elem: ET.Element) -> str:
    """Inline text of a block; nested media / screen blocks and untranslatable spans left out."""
    parts = [elem.text or ""]
    for child in elem:
        if _local(child.tag) not in ("media", "screen") and child.get(_ITS_TRANSLATE) != "no":
            parts.append(_block_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def mallard_blocks(xml_text: str) -> List[Tuple[str, str]]:
    """(tag path, cleaned text) of every text block of a page, in document order."""
    root = ET.fromstring(xml_text)
    out: List[Tuple[str, str]] = []

    def walk(elem: ET.Element, path: str) -> None:
        tag = _local(elem.tag)
        if tag in _NO_TEXT or elem.get(_ITS_TRANSLATE) == "no":
            return
        if tag in _BLOCKS:
            out.append((f"{path}/{tag}", clean_segment(_block_text(elem))))
            return
        for child in elem:
            walk(child, f"{path}/{tag}")

    walk(root, "")
    return out


def align_mallard_pages(en_xml: str, de_xml: str) -> Optional[List[Segment]]:
    """Block pairs of an English page and its German translation; None when the structures differ."""
    en, de = mallard_blocks(en_xml), mallard_blocks(de_xml)
    if [tag for tag, _ in en] != [tag for tag, _ in de]:
        return None
    return [(e, d) for (_, e), (_, d) in zip(en, de)]


def read_gnome(help_root: Path, skipped: Optional[List[str]] = None) -> Iterator[Document]:
    """One document per page of every guide with a German translation (``<root>/{C,de}/<guide>/*.page``)."""
    for en_path in sorted(Path(help_root).glob("C/*/*.page")):
        guide = en_path.parent.name
        de_path = Path(help_root) / "de" / guide / en_path.name
        if not de_path.is_file():
            continue
        try:
            pairs = align_mallard_pages(en_path.read_text(encoding="utf-8"), de_path.read_text(encoding="utf-8"))
        except ET.ParseError:
            pairs = None
        if pairs is None:
            if skipped is not None:
                skipped.append(f"{guide}/{en_path.stem}")
            continue
        yield Document("gnome", f"{guide}/{en_path.stem}", pairs)


# ---- Fish Fillets dialogue (Lua) ---------------------------------------------------------------------
def dialog_pairs(path: Path) -> List[Segment]:
    """(English, German) of every ``dialogId(id, font, en)`` with its ``dialogStr(de)`` in a ``dialogs_de.lua``
    (the one parser of the format: tasks/corpora/fillets_dialogs.py, which the speech corpus reads too);
    a line without a translation is no pair."""
    return [(clean_segment(line.english), clean_segment(line.text)) for line in parse_dialogs(path) if line.text]


def read_fillets(script_root: Path) -> Iterator[Document]:
    """One document per game level (``<root>/<level>/dialogs_de.lua``)."""
    for path in sorted(Path(script_root).glob("*/dialogs_de.lua")):
        yield Document("fillets", path.parent.name, dialog_pairs(path))
