"""DrQA's tagger token features: the part of speech and named-entity type of every paragraph token.

    tags = paragraph_tags(contexts, spans, cache=folder)   # per context: (Lp, 2) uint8, [NER id, POS id]
    one_hot_tags(tags)                                     # (Lp, NUM_TAG_FEATURES) float32

Why: the generated questions teach the reader which answer type each question asks for ("When" -> a date,
"What nationality" -> a NORP entity, "Who" -> a person or organisation). Without tags the reader can only
learn that from the words themselves, which a hand-written question about a new paragraph rarely shares with
the training set; with them "German" is a NORP token whatever the word. Entity types also give the span its
edges ("Harland and Wolff" is one ORG). DrQA (Chen et al. 2017, section 3.1) uses the same two features.

The tags come from spaCy's en_core_web_md (tagger + NER; the question generator's pipeline,
tasks/squad/parser.py), aligned to the reader's own tokens (tasks/squad/data.py:tokenize) by character
offset: a reader token takes the tags of the spaCy token holding its first character. Tagging runs on
the paragraphs only (questions keep their word features) at about 6,000 words per CPU-second; the tags of a
whole split are cached on disk under the word2vec cache (keyed by the paragraphs' digest), so only the
first run on a corpus pays for them.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

TAGGERS = ("spacy_en_md",)
# OntoNotes entity types (en_core_web_md's NER); id 0 = outside an entity
NER_LABELS = ("", "PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
              "LANGUAGE", "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
# Universal POS tags; id 0 = none (a reader token spaCy did not see, e.g. whitespace-only context)
POS_LABELS = ("", "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
              "PUNCT", "SCONJ", "SYM", "VERB", "X")
NUM_TAG_FEATURES = (len(NER_LABELS) - 1) + (len(POS_LABELS) - 1)  # "none" is all zeros
_NER_ID = {label: i for i, label in enumerate(NER_LABELS)}
_POS_ID = {label: i for i, label in enumerate(POS_LABELS)}
BATCH = 64


def num_tag_features(tagger: Optional[str]) -> int:
    return NUM_TAG_FEATURES if tagger else 0


def check_tagger(tagger: Optional[str]) -> None:
    if tagger is not None and tagger not in TAGGERS:
        raise ValueError(f"task.tagger={tagger!r}: expected one of {', '.join(TAGGERS)} or null (no tagger features)")


def _align(doc, spans: Sequence[Tuple[int, int]]) -> Tensor:
    """[NER id, POS id] of each reader token: those of the spaCy token holding its first character."""
    owner: Dict[int, object] = {}
    for tok in doc:
        for c in range(tok.idx, tok.idx + len(tok.text)):
            owner[c] = tok
    rows = []
    for s, _ in spans:
        tok = owner.get(s)
        rows.append((_NER_ID.get(tok.ent_type_, 0), _POS_ID.get(tok.pos_, _POS_ID["X"])) if tok is not None
                    else (0, 0))
    return torch.tensor(rows, dtype=torch.uint8).view(-1, 2)


def _digest(contexts: Sequence[str], spans: Sequence[Sequence[Tuple[int, int]]]) -> str:
    h = hashlib.sha1(b"tags-v1")
    for text, sp in zip(contexts, spans):
        h.update(text.encode("utf-8"))
        h.update(repr(list(sp)).encode())
    return h.hexdigest()[:16]


def default_cache() -> Path:
    from tasks.common.word2vec import cache_dir
    return cache_dir() / "spacy" / "squad_tags"


def paragraph_tags(contexts: Sequence[str], spans: Sequence[Sequence[Tuple[int, int]]],
                   cache: Optional[Path] = None, progress: bool = False) -> List[Tensor]:
    """Tags of each context's reader tokens; with ``cache`` (a folder) read from / saved to one file per call."""
    path = None
    if cache is not None and contexts:
        path = Path(cache) / f"{_digest(contexts, spans)}.pt"
        if path.is_file():
            return torch.load(path)
    from tasks.squad.parser import load_parser
    nlp = load_parser()
    docs = nlp.pipe(contexts, disable=["parser", "lemmatizer"], batch_size=BATCH)
    if progress and len(contexts) > BATCH:
        from tqdm import tqdm
        docs = tqdm(docs, total=len(contexts), desc="[squad] tagging paragraphs", unit="paragraph",
                    mininterval=2.0)
    tags = [_align(doc, sp) for doc, sp in zip(docs, spans)]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        torch.save(tags, partial)
        partial.replace(path)  # atomic: a killed run never leaves a half-written cache
    return tags


def one_hot_tags(tags: Tensor) -> Tensor:
    """(L, 2) uint8 ids -> (L, NUM_TAG_FEATURES) float32; id 0 (none) has no column."""
    ner = torch.nn.functional.one_hot(tags[:, 0].long(), len(NER_LABELS))[:, 1:]
    pos = torch.nn.functional.one_hot(tags[:, 1].long(), len(POS_LABELS))[:, 1:]
    return torch.cat([ner, pos], dim=1).float()
