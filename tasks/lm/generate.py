"""Step-by-step decoding of a trained language model: continue a prompt, or score a text.

Prompt and sample run one ``encoder.step`` per token (SRU / LSTM: the recurrent state; SRU++: the
key/value cache of ``sru.SRUpp.decode``), so generating N tokens costs N single-position steps, not N
forwards over a growing prefix, and the logits equal those of one causal forward over prompt + sample
(tests/test_srupp_lm.py). Used by ``predict.py`` (task=lm / lm_char) and ``python -m tasks.lm.sample``.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn


def head(model: nn.Module, h: Tensor) -> Tensor:
    """Logits from encoder outputs (the LanguageModel's output layers, eval mode)."""
    if model.proj is not None:
        h = model.proj(h)
    return model.decoder(h)


@torch.no_grad()
def generate(model: nn.Module, prompt_ids: List[int], n_tokens: int, temperature: float = 1.0, top_k: int = 0,
             generator: Optional[torch.Generator] = None, greedy: bool = False,
             stop_id: Optional[int] = None) -> Tuple[List[int], Tensor]:
    """(generated ids, the logits each was drawn from (n, V)) after ``prompt_ids``; stops after
    ``stop_id`` (the end of a line) when given."""
    if not prompt_ids:
        raise ValueError("generate: the prompt must hold at least one token")
    device = next(model.parameters()).device
    state = None
    for token in prompt_ids:  # one step each: for SRU++ this is exactly the causal forward's context
        h_t, state = model.encoder.step(model.embed(torch.tensor([token], device=device)), state)
    logits = head(model, h_t)                               # (1, V)
    out, all_logits = [], []
    for _ in range(n_tokens):
        all_logits.append(logits[0])
        scores = logits[0].float() / max(temperature, 1e-6)
        if top_k > 0:
            kth = scores.topk(min(top_k, scores.numel())).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if greedy:
            next_id = int(scores.argmax())
        else:
            next_id = int(torch.multinomial(scores.softmax(-1).cpu(), 1, generator=generator))
        out.append(next_id)
        if next_id == stop_id:
            break
        h_t, state = model.encoder.step(model.embed(torch.tensor([next_id], device=device)), state)
        logits = head(model, h_t)
    return out, torch.stack(all_logits) if all_logits else torch.empty(0)


@torch.no_grad()
def log_probability(model: nn.Module, context_id: int, ids: List[int]) -> float:
    """Natural-log probability of ``ids`` after the one token ``context_id`` (the previous line's end),
    from one causal forward over the line."""
    device = next(model.parameters()).device
    tokens = torch.tensor([context_id] + ids[:-1], device=device).unsqueeze(1)   # (L, 1)
    logits, _ = model(tokens)
    lprobs = torch.log_softmax(logits.float().squeeze(1), dim=-1)
    return float(lprobs.gather(1, torch.tensor(ids, device=device).unsqueeze(1)).sum())


def perplexity(logprob: float, n: int) -> float:
    return math.exp(-logprob / max(n, 1)) if -logprob / max(n, 1) < 700 else math.inf
