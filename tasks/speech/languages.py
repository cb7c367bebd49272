"""One shared acoustic model, decoded per language: each language of the training data gets its own alphabet
(the labels its training transcripts use) and its own character LM (fitted on its transcripts alone), and an
utterance is decoded in the language it is told (``language=cs``) or the one it is identified as
(``language=auto``, the default).

    langs = LanguageDecoders.fit(targets, languages, order=8, vocab_size=58)   # setup(): None without languages
    ids, lang = langs.decode(log_probs, "auto", settings)                     # one utterance (T, V)

Identification: the utterance is decoded under every language (its alphabet and its LM) and the language
whose decoding scores best wins. The score is what the decoder ranks hypotheses by: log P_ctc of the
transcript within that alphabet + lm_weight x log P_lm (end of utterance included) + bonus x characters
(the beam, tasks/speech/decoding.py), or for greedy the best path's log-probability within the alphabet +
lm_weight x log P_lm. Dutch heard as Czech then pays both for the letters Dutch never writes and for the
Czech LM's surprise at Dutch words; nothing is trained for it, and a language is only as good as its LM.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

from tasks.speech.char_lm import CharNgramLM
from tasks.speech.decoding import collapse, scored_beam_search
from tasks.speech.inference import char_lm_from_state, char_lm_state

AUTO = "auto"  # identify the language of each utterance


@dataclass(frozen=True)
class DecodeSettings:
    """How one utterance is decoded: ``beam`` None for greedy; the LM's weight and the (gated) bonus."""
    beam: Optional[int]
    lm_weight: float
    bonus: float


@dataclass
class LanguageDecoder:
    labels: Tuple[int, ...]          # the labels its training transcripts use (blank always allowed)
    lm: Optional[CharNgramLM]        # its own character LM (None: task.lm_order=0 or a greedy model)


class LanguageDecoders:
    def __init__(self, by_language: Mapping[str, LanguageDecoder]):
        self.by_language = dict(sorted(by_language.items()))

    @classmethod
    def fit(cls, targets: Sequence[Sequence[int]], languages: Sequence[Optional[str]], order: int,
            vocab_size: int) -> Optional["LanguageDecoders"]:
        """Alphabets (and LMs when ``order`` > 0) of each language of the training transcripts; None when an
        utterance has no language (a corpus without language labels decodes as one)."""
        if not languages or any(lang is None for lang in languages):
            return None
        grouped: Dict[str, List[Sequence[int]]] = defaultdict(list)
        for target, lang in zip(targets, languages):
            grouped[str(lang)].append(target)
        return cls({lang: LanguageDecoder(tuple(sorted({c for t in seqs for c in t})),
                                          CharNgramLM.fit(seqs, order, vocab_size) if order > 0 else None)
                    for lang, seqs in grouped.items()})

    @property
    def names(self) -> List[str]:
        return list(self.by_language)

    def check(self, language: str) -> None:
        """One line when the model has no such language (``auto`` always works)."""
        if language != AUTO and language not in self.by_language:
            raise ValueError(f"language={language}: this model was trained on {', '.join(self.names)}; "
                             f"give language={' or language='.join(self.names)} or language=auto")

    def decode(self, log_probs: Tensor, language: str, settings: DecodeSettings) -> Tuple[List[int], str]:
        """The label ids of one utterance (``log_probs`` (T, V)) in ``language``, or under every language
        for ``auto`` (the best-scoring one kept), and the language decoded in."""
        names = self.names if language == AUTO else [language]
        best: Optional[Tuple[float, List[int], str]] = None
        for name in names:
            ids, score = self._decode_one(log_probs, self.by_language[name], settings)
            if best is None or score > best[0]:
                best = (score, ids, name)
        return best[1], best[2]

    @staticmethod
    def _decode_one(log_probs: Tensor, lang: LanguageDecoder, s: DecodeSettings) -> Tuple[List[int], float]:
        if s.beam is not None:
            return scored_beam_search(log_probs, beam=s.beam, lm=lang.lm, lm_weight=s.lm_weight if lang.lm else 0.0,
                                      bonus=s.bonus, allowed=lang.labels)
        allowed = torch.full((log_probs.size(-1),), float("-inf"))
        allowed[[0, *lang.labels]] = 0.0
        best, path = (log_probs.float().cpu() + allowed).max(-1)
        ids = collapse(path.tolist())
        lm_score = s.lm_weight * lang.lm.sequence_log_prob(ids) if lang.lm is not None else 0.0
        return ids, float(best.sum()) + lm_score

    # ---- model.pt ------------------------------------------------------------------------------------
    def state(self) -> Dict[str, Any]:
        return {name: {"labels": list(d.labels), "char_lm": char_lm_state(d.lm) if d.lm is not None else None}
                for name, d in self.by_language.items()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "LanguageDecoders":
        return cls({name: LanguageDecoder(tuple(int(c) for c in d["labels"]),
                                          char_lm_from_state(d["char_lm"]) if d.get("char_lm") else None)
                    for name, d in state.items()})
