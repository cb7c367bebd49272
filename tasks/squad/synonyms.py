"""Words a person may use for a paragraph's word: WordNet lemmas and synonyms (``task.synonyms``).

    wordnet = load_wordnet()                               # Debian's wordnet-base, /usr/share/wordnet
    column = synonym_column(wordnet, context_tokens, question_tokens)   # (Lp, 1): 1 where a lemma or synonym matches
    copies = synonym_questions(encoded, wordnet, share, seed)           # training questions with a word swapped

Why: a generated question repeats its sentence's words (84% of them, tasks/squad/README.md), a person's does not
(60%; 78% of the hand-written questions hold a content word their sentence lacks: "What did Galileo find?" for
"discovered", "struck" for "strike"). The word features (exact, uncased, stem) see none of that, and the reader's
embeddings, trained on 13,000 generated questions, cannot learn synonyms they never meet. So one more feature
column marks a paragraph token whose lemma is a question word's lemma or one of its synonyms (WordNet's first
``SENSES`` senses of the same part of speech; irregular forms from WordNet's exception lists, the rest by
WordNet's own suffix rules, "morphy"), and in training a share of the questions are copied with one content
word replaced by a synonym, so the reader learns to trust that column where the exact-match ones are 0.

WordNet 3.0 (Princeton, a BSD-like licence) comes from Debian's ``wordnet-base`` (28 MB): read, never copied
into the project.
"""
from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import torch
from torch import Tensor

WORDNET_DIR = Path("/usr/share/wordnet")
POS_FILES = ("noun", "verb", "adj", "adv")
SENSES = 2  # a word's synonyms: those of its most frequent senses only (the rarer ones drift: "bank" -> "trust")
# suffix rules of WordNet's morphy (a form -> a lemma candidate), per part of speech
DETACH = {"noun": (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
                   ("ies", "y"), ("s", "")),
          "verb": (("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", ""),
                   ("s", "")),
          "adj": (("est", "e"), ("est", ""), ("er", "e"), ("er", "")), "adv": ()}
# function words and question words: never matched or swapped (their "synonyms" are other function words)
STOP = frozenset("""a an the of in on at to for from by with as and or but not no is are was were be been being am
do does did done have has had having it its he she they them his her their this that these those what which who
whom whose when where why how there here than then so such can could will would shall should may might must
one two first also about into over after before up out many much more most other some any all each
go get got make made take give come put set let""".split())  # light verbs: synonyms of everything


class WordNet:
    """Lemmas per part of speech (sense order kept) and the single-word members of each synset."""

    def __init__(self, folder: Path = WORDNET_DIR):
        missing = [f"{kind}.{pos}" for pos in POS_FILES for kind in ("index", "data")
                   if not (folder / f"{kind}.{pos}").is_file()]
        if missing:
            raise FileNotFoundError(f"task.synonyms needs WordNet 3.0 in {folder} (no {missing[0]}): "
                                    f"apt-get install wordnet-base, or task.synonyms=false")
        self.senses: Dict[str, Dict[str, List[int]]] = {}   # pos -> lemma -> synset offsets, most frequent first
        self.members: Dict[str, Dict[int, Tuple[str, ...]]] = {}  # pos -> offset -> its one-word lemmas
        self.exceptions: Dict[str, Dict[str, List[str]]] = {}  # pos -> irregular form -> lemmas
        for pos in POS_FILES:
            self.senses[pos] = _index(folder / f"index.{pos}")
            self.members[pos] = _data(folder / f"data.{pos}")
            exc = folder / f"{pos}.exc"
            self.exceptions[pos] = _exceptions(exc) if exc.is_file() else {}

    def lemmas(self, word: str, pos: str) -> List[str]:
        """The lemmas ``word`` can be a form of in ``pos`` (the word itself first where it is one)."""
        w = word.lower()
        index = self.senses[pos]
        found = [w] if w in index else []
        found += [lemma for lemma in self.exceptions[pos].get(w, ()) if lemma in index]
        found += [w[: len(w) - len(a)] + b for a, b in DETACH[pos] if w.endswith(a) and len(w) > len(a) + 1
                  and w[: len(w) - len(a)] + b in index]
        return list(dict.fromkeys(found))

    def all_lemmas(self, word: str) -> FrozenSet[str]:
        return frozenset(lemma for pos in POS_FILES for lemma in self.lemmas(word, pos))

    def synonyms(self, word: str) -> FrozenSet[str]:
        """The one-word lemmas sharing one of the first ``SENSES`` senses of a lemma of ``word`` (any part of
        speech), without the word's own lemmas."""
        own = self.all_lemmas(word)
        out: Set[str] = set()
        for pos in POS_FILES:
            for lemma in self.lemmas(word, pos):
                for offset in self.senses[pos][lemma][:SENSES]:
                    out.update(self.members[pos].get(offset, ()))
        return frozenset(out - own)


def _index(path: Path) -> Dict[str, List[int]]:
    """index.<pos>: lemma pos synset_cnt p_cnt [ptr...] sense_cnt tagsense_cnt offset... (senses by frequency)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(" "):  # the licence header
                continue
            parts = line.split()
            synsets, pointers = int(parts[2]), int(parts[3])
            out[parts[0]] = [int(p) for p in parts[6 + pointers: 6 + pointers + synsets]]
    return out


def _data(path: Path) -> Dict[int, Tuple[str, ...]]:
    """data.<pos>: offset lex_filenum ss_type w_cnt(hex) word lex_id ...: the synset's one-word lemmas."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(" "):
                continue
            parts = line.split(" ", 4 + 2 * 64)
            count = int(parts[3], 16)
            words = [parts[4 + 2 * k].lower().split("(")[0] for k in range(count)]  # adj markers: "big(a)"
            out[int(parts[0])] = tuple(w for w in words if w.isalpha())
    return out


def _exceptions(path: Path) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            form, *lemmas = line.split()
            out.setdefault(form, []).extend(lemmas)
    return out


_loaded: Dict[Path, WordNet] = {}


def load_wordnet(folder: Optional[Path] = None) -> WordNet:
    """WordNet, read once per process (~3 s)."""
    folder = Path(folder) if folder is not None else WORDNET_DIR
    if folder not in _loaded:
        _loaded[folder] = WordNet(folder)
    return _loaded[folder]


def content_word(token: str) -> bool:
    return token.isalpha() and len(token) > 2 and token.lower() not in STOP


def synonym_column(wordnet: WordNet, context_tokens: Sequence[str], question_tokens: Sequence[str]) -> Tensor:
    """(Lp, 1) float32: 1 on a paragraph content word whose lemma is a lemma or synonym of a question content
    word ("struck" for "strike", "found" for "discover"), 0 elsewhere."""
    wanted: Set[str] = set()
    for q in question_tokens:
        if content_word(q) and not q[:1].isupper():  # a name has no synonyms worth the noise
            wanted |= wordnet.all_lemmas(q) | wordnet.synonyms(q)
    wanted -= STOP
    marks = [float(content_word(t) and bool(wanted) and not wanted.isdisjoint(wordnet.all_lemmas(t)))
             for t in context_tokens]
    return torch.tensor(marks, dtype=torch.float32).view(-1, 1)


def swap_synonyms(wordnet: WordNet, word: str) -> FrozenSet[str]:
    """Synonyms safe to put in a question in ``word``'s place: ``word`` is a lemma and no other word's form
    ("saw" is also "see"), and only its commonest part of speech's first sense is used ("class": the noun's)."""
    if wordnet.all_lemmas(word) != {word}:
        return frozenset()
    senses = {pos: wordnet.senses[pos].get(word, []) for pos in POS_FILES}
    pos = max(POS_FILES, key=lambda p: len(senses[p]))
    return frozenset(wordnet.members[pos].get(senses[pos][0], ())) - {word} - STOP


def swap_candidates(wordnet: WordNet, question: Sequence[str], context: Set[str]) -> List[Tuple[int, List[str]]]:
    """(position, synonyms) of the question's lower-case content words that are their own lemma (so a synonym's
    base form fits: "What did Galileo discover?"), with the one-word synonyms the paragraph does not contain."""
    out = []
    for i, q in enumerate(question):
        after_wh = i > 0 and question[i - 1].lower() in ("which", "what", "whose", "how")  # the asked kind stays
        if not content_word(q) or not q.islower() or after_wh:
            continue
        choices = sorted(s for s in swap_synonyms(wordnet, q) if s not in context)
        if choices:
            out.append((i, choices))
    return out
