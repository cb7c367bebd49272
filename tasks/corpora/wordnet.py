"""WordNet 3.0 from Debian's ``wordnet-base`` (/usr/share/wordnet; Princeton's BSD-like licence): lemmas and
synonyms of English words, read from its index, data and exception files, never copied into the project.

    wordnet = load_wordnet()
    wordnet.all_lemmas("struck")   # {"strike", "struck"}: irregular forms from the exception lists
    wordnet.synonyms("discover")   # {"find", "detect", "observe", ...}: the first SENSES senses only

A word's lemmas follow WordNet's own "morphy": its exception lists, then suffix rules per part of speech. Used by
SQuAD's ``task.synonyms`` (tasks/squad/features.py: a lemma-or-synonym column and synonym copies of questions).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

WORDNET_DIR = Path("/usr/share/wordnet")
POS_FILES = ("noun", "verb", "adj", "adv")
SENSES = 2  # a word's synonyms: those of its most frequent senses only (the rarer ones drift: "bank" -> "trust")
# suffix rules of WordNet's morphy (a form -> a lemma candidate), per part of speech
DETACH = {"noun": (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
                   ("ies", "y"), ("s", "")),
          "verb": (("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", ""),
                   ("s", "")),
          "adj": (("est", "e"), ("est", ""), ("er", "e"), ("er", "")), "adv": ()}


class WordNet:
    """Lemmas per part of speech (sense order kept) and the single-word members of each synset."""

    def __init__(self, folder: Path = WORDNET_DIR):
        missing = [f"{kind}.{pos}" for pos in POS_FILES for kind in ("index", "data")
                   if not (folder / f"{kind}.{pos}").is_file()]
        if missing:
            raise FileNotFoundError(f"WordNet 3.0 not found in {folder} (no {missing[0]}): apt-get install "
                                    f"wordnet-base (SQuAD without it: task.synonyms=false)")
        self.senses: Dict[str, Dict[str, List[int]]] = {}   # pos -> lemma -> synset offsets, most frequent first
        self.members: Dict[str, Dict[int, Tuple[str, ...]]] = {}  # pos -> offset -> its one-word lemmas
        self.exceptions: Dict[str, Dict[str, List[str]]] = {}  # pos -> irregular form -> lemmas
        for pos in POS_FILES:
            self.senses[pos] = _index(folder / f"index.{pos}")
            self.members[pos] = _data(folder / f"data.{pos}")
            exc = folder / f"{pos}.exc"
            self.exceptions[pos] = _exceptions(exc) if exc.is_file() else {}
        self._lemmas: Dict[str, FrozenSet[str]] = {}  # all_lemmas / synonyms per word: asked once per paragraph
        self._synonyms: Dict[str, FrozenSet[str]] = {}   # token and question, so remembered

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
        found = self._lemmas.get(word)
        if found is None:
            found = self._lemmas[word] = frozenset(lemma for pos in POS_FILES for lemma in self.lemmas(word, pos))
        return found

    def synonyms(self, word: str) -> FrozenSet[str]:
        """The one-word lemmas sharing one of the first ``SENSES`` senses of a lemma of ``word`` (any part of
        speech), without the word's own lemmas."""
        found = self._synonyms.get(word)
        if found is None:
            out: Set[str] = set()
            for pos in POS_FILES:
                for lemma in self.lemmas(word, pos):
                    for offset in self.senses[pos][lemma][:SENSES]:
                        out.update(self.members[pos].get(offset, ()))
            found = self._synonyms[word] = frozenset(out - self.all_lemmas(word))
        return found


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
