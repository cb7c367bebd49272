"""One vocabulary for every task: token <-> id, specials chosen by the task, saved with the run.

    vocab = Vocabulary.build(train_sentences, specials=(PAD, UNK, BOS, EOS), min_freq=2, max_size=30000)
    ids = vocab.encode(tokens)          # unknown tokens -> unk id
    vocab.save(run_dir / "vocab.json"); Vocabulary.load(...)

Ids: the specials first, in the order the task gives them (LM: ``<unk> <eos>``; classification:
``<pad> <unk>``; translation: ``<pad> <unk> <s> </s>``), then tokens by descending training frequency, ties
alphabetical, so the same corpus always gives the same ids. Tokenisation stays with each task (words for
PTB, Kim's clean_str for classification, subwords for translation, characters for speech).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

import torch
from torch import Tensor

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"


class Vocabulary:
    def __init__(self, tokens: Sequence[str], specials: Sequence[str] = (PAD, UNK)):
        specials = list(specials)
        if UNK not in specials:
            raise ValueError(f"a vocabulary needs {UNK!r} among its specials (unknown tokens map to it), "
                             f"received {specials}")
        self.specials = specials
        self.itos: List[str] = specials + [t for t in tokens if t not in set(specials)]
        self.stoi: Dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("Vocabulary tokens must be unique")
        self.unk_id = self.stoi[UNK]

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], specials: Sequence[str] = (PAD, UNK), min_freq: int = 1,
              max_size: Optional[int] = None) -> "Vocabulary":
        """From training sentences: tokens seen ``min_freq`` times or more, at most ``max_size`` ids in all
        (specials included)."""
        return cls.from_counts(Counter(tok for sent in sentences for tok in sent), specials, min_freq, max_size)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], specials: Sequence[str] = (PAD, UNK), min_freq: int = 1,
                    max_size: Optional[int] = None) -> "Vocabulary":
        if int(min_freq) < 1:
            raise ValueError(f"min_freq: expected an integer >= 1, received {min_freq}")
        if max_size is not None and int(max_size) <= len(specials):
            raise ValueError(f"max_size: expected more than the {len(specials)} special tokens, received {max_size}")
        ranked = sorted((t for t, c in counts.items() if c >= min_freq and t not in set(specials)),
                        key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[: int(max_size) - len(specials)]
        return cls(ranked, specials)

    def id(self, special: str) -> int:
        """Id of a special token, with an error naming the specials when the task did not ask for it."""
        if special not in self.specials:
            raise KeyError(f"this vocabulary has no {special!r}; its specials are {self.specials}")
        return self.stoi[special]

    @property
    def pad_id(self) -> int:
        return self.id(PAD)

    @property
    def bos_id(self) -> int:
        return self.id(BOS)

    @property
    def eos_id(self) -> int:
        return self.id(EOS)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Sequence[str]) -> List[int]:
        get, unk = self.stoi.get, self.unk_id
        return [get(t, unk) for t in tokens]

    def encode_tensor(self, tokens: Sequence[str]) -> Tensor:
        return torch.tensor(self.encode(tokens), dtype=torch.long)

    def decode(self, ids: Iterable[int], skip_specials: bool = True) -> List[str]:
        special_ids = {self.stoi[s] for s in self.specials if s != UNK} if skip_specials else set()
        return [self.itos[int(i)] for i in ids if int(i) not in special_ids]

    # ---- saved with the run ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"specials": list(self.specials), "itos": list(self.itos)}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> "Vocabulary":
        specials = list(state["specials"])
        return cls(list(state["itos"])[len(specials):], specials)

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.state_dict(), ensure_ascii=False))

    @classmethod
    def load(cls, path: Path) -> "Vocabulary":
        return cls.from_state_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def check_same(self, state: Mapping, what: str = "checkpoint") -> None:
        """Resume guard: the vocabulary rebuilt from the data must be the one the run was trained with."""
        saved = list(state.get("itos", []))
        if saved and saved != self.itos:
            raise ValueError(f"the vocabulary built from the data ({len(self)} tokens) differs from the one in the "
                             f"{what} ({len(saved)} tokens): the data files changed since the run started; "
                             f"resume with the original data or start a new run")
