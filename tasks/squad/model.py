"""The DrQA document reader (Chen et al. 2017) with a pluggable recurrent unit (the paper's Table 2).

    paragraph token p_i: [ E(p_i) ; aligned question embedding ; token features ] -> stacked BiRNN, all
                         layers' outputs concatenated -> P (Lp, B, layers*2h)
    question token q_j:  E(q_j) -> its own stacked BiRNN, all layers concatenated -> Q (Lq, B, layers*2h)
    question vector:     q = sum_j softmax_j(w . Q_j) Q_j             (self-attention merge)
    scores:              start_i = P_i W_s q,  end_i = P_i W_e q      (bilinear)

Aligned question embedding: f(p_i) = sum_j a_ij E(q_j), a_ij = softmax_j(relu(W E(p_i)) . relu(W E(q_j))).
Padding: the encoders get ``mask_pad``; attention and scores are masked on padding. The unit (SRU or LSTM)
comes from ``build_encoder(cfg.model)``: everything else is identical between ``model=sru`` and
``model=lstm``, which is what makes the comparison fair. ``encoder_seconds`` accumulates the wall time of
the two encoders' forward passes (the paper's "RNN time" share of an epoch).
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.encoders import build_encoder

NEG = -1e30


def _masked_softmax(scores: Tensor, mask_pad: Tensor, dim: int) -> Tensor:
    # in float32: a large negative fill would overflow half precision under autocast
    return scores.float().masked_fill(mask_pad, NEG).softmax(dim).to(scores.dtype)


class AlignedQuestionEmbedding(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, p_emb: Tensor, q_emb: Tensor, q_mask_pad: Tensor) -> Tensor:
        """p_emb (B, Lp, D), q_emb (B, Lq, D), q_mask_pad (B, Lq) -> (B, Lp, D)."""
        p = F.relu(self.proj(p_emb))
        q = F.relu(self.proj(q_emb))
        scores = p.bmm(q.transpose(1, 2))  # (B, Lp, Lq)
        return _masked_softmax(scores, q_mask_pad.unsqueeze(1), -1).bmm(q_emb)


class PartlyTunedEmbedding(nn.Module):
    """DrQA's tune_partial: rows [0, fixed_rows_from) are trained (``weight``), the pretrained rows past the
    top-N question words stay fixed (``fixed``, a buffer; the state dict holds them as one table). Kept apart so that the optimiser neither gets a
    dense gradient over the whole table nor updates it: with 38k x 300 spaCy vectors that was ~0.2 CPU-s a
    step. ``fixed_rows_from`` None: every row is trained."""

    def __init__(self, table: Tensor, fixed_rows_from: Optional[int] = None, padding_idx: int = 0):
        super().__init__()
        k = table.shape[0] if fixed_rows_from is None else min(int(fixed_rows_from), table.shape[0])
        self.padding_idx = padding_idx
        self.weight = nn.Parameter(table[:k].clone())
        self.register_buffer("fixed", table[k:].clone(), persistent=False)  # saved inside "weight", below

    def forward(self, ids: Tensor) -> Tensor:
        k = self.weight.shape[0]
        tuned = F.embedding(ids.clamp(max=k - 1), self.weight, self.padding_idx)
        if self.fixed.shape[0] == 0:
            return tuned
        fixed = F.embedding((ids - k).clamp(min=0), self.fixed)
        return torch.where((ids < k).unsqueeze(-1), tuned, fixed)

    # saved as one table, ``weight`` (vocab, dim), as before the split: checkpoints and exported models keep
    # their layout, and ones saved before load as they are
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        weight = self.weight if keep_vars else self.weight.detach()
        destination[prefix + "weight"] = torch.cat([weight, self.fixed]) if len(self.fixed) else weight

    def _load_from_state_dict(self, state, prefix, *args, **kwargs):
        whole = state.get(prefix + "weight")
        k = self.weight.shape[0]
        if whole is not None and whole.shape[0] == k + len(self.fixed) and len(self.fixed):
            with torch.no_grad():
                self.fixed.copy_(whole[k:])
            state = dict(state)
            state[prefix + "weight"] = whole[:k]
        super()._load_from_state_dict(state, prefix, *args, **kwargs)


class DocumentReader(nn.Module):
    def __init__(self, embedding: Tensor, num_features: int, model_cfg: Any, emb_dropout: float = 0.2,
                 fixed_rows_from: Optional[int] = None, padding_idx: int = 0):
        super().__init__()
        vocab, dim = embedding.shape
        self.embedding = PartlyTunedEmbedding(embedding, fixed_rows_from, padding_idx)
        self.emb_dropout = nn.Dropout(emb_dropout)
        self.align = AlignedQuestionEmbedding(dim)
        cfg = dataclasses.replace(model_cfg, bidirectional=True)  # the reader's encoders read both ways (DrQA)
        self.doc_rnn = build_encoder(cfg, 2 * dim + num_features)
        self.question_rnn = build_encoder(cfg, dim)
        hidden = self.doc_rnn.output_size * self.doc_rnn.num_layers  # all layers concatenated
        self.question_attention = nn.Linear(hidden, 1)
        self.start_bilinear = nn.Linear(hidden, hidden)
        self.end_bilinear = nn.Linear(hidden, hidden)
        self.encoder_seconds = 0.0  # see _encode
        self._open_backward, self._backward_t0 = 0, 0.0

    @staticmethod
    def _now(t: Tensor) -> float:
        if t.is_cuda:
            torch.cuda.synchronize()  # the timer must see the kernels finish, not just their launch
        return time.perf_counter()

    def _encode(self, rnn: nn.Module, x: Tensor, mask_pad: Tensor) -> Tensor:
        """Run one encoder; in training mode add its forward time and (through gradient hooks on its
        output and input) its backward time to ``encoder_seconds``. Backward of the two encoders is
        timed as one interval, from the first output gradient to the last input gradient."""
        t0 = self._now(x)
        layers, _ = rnn(x, mask_pad=mask_pad, return_all_layers=True)
        out = torch.cat(layers, dim=-1)
        if self.training:
            self.encoder_seconds += self._now(out) - t0
            if out.requires_grad and x.requires_grad:
                out.register_hook(self._backward_enters)
                x.register_hook(self._backward_leaves)
        return out

    def _backward_enters(self, grad: Tensor) -> None:
        if self._open_backward == 0:
            self._backward_t0 = self._now(grad)
        self._open_backward += 1

    def _backward_leaves(self, grad: Tensor) -> None:
        self._open_backward -= 1
        if self._open_backward == 0:
            self.encoder_seconds += self._now(grad) - self._backward_t0

    def forward(self, context: Tensor, context_mask_pad: Tensor, features: Tensor, question: Tensor,
                question_mask_pad: Tensor) -> Tuple[Tensor, Tensor]:
        """context (Lp, B), features (Lp, B, F), question (Lq, B), masks (L, B) true on padding
        -> start and end scores (B, Lp), padding set to a large negative number."""
        p_emb = self.emb_dropout(self.embedding(context))
        q_emb = self.emb_dropout(self.embedding(question))
        aligned = self.align(p_emb.transpose(0, 1), q_emb.transpose(0, 1), question_mask_pad.t()).transpose(0, 1)
        doc = self._encode(self.doc_rnn, torch.cat([p_emb, aligned, features.to(p_emb.dtype)], -1), context_mask_pad)
        ques = self._encode(self.question_rnn, q_emb, question_mask_pad)  # (Lq, B, H)
        weights = _masked_softmax(self.question_attention(ques).squeeze(-1), question_mask_pad, 0)  # (Lq, B)
        q_vec = (weights.unsqueeze(-1) * ques).sum(0)  # (B, H)
        doc_b = doc.transpose(0, 1)  # (B, Lp, H)
        start = doc_b.bmm(self.start_bilinear(q_vec).unsqueeze(2)).squeeze(2)
        end = doc_b.bmm(self.end_bilinear(q_vec).unsqueeze(2)).squeeze(2)
        mask = context_mask_pad.t()
        return start.float().masked_fill(mask, NEG), end.float().masked_fill(mask, NEG)


class ReaderEnsemble(nn.Module):
    """``task.readers`` independent DocumentReaders trained side by side on the same batches (each on its own
    loss, from its own initialisation) and answering together: the span is decoded from the mean of their
    start and end probabilities (``combine_scores``).

    Why it was tried: single readers trained on the generated questions differ by several points from seed to
    seed on questions people write (the hand-written check set), while agreeing on the generated ones.
    Measured (docs/results_squad.md): three readers scored better on the generated test split but not on the
    check set (F1 67.0 against 66.1-74.7 for single readers), for three times the training, so the default
    is one reader (``task.readers: 1``); the paper's Table 2 cells keep one too."""

    def __init__(self, members: List[DocumentReader]):
        super().__init__()
        self.members = nn.ModuleList(members)

    @property
    def encoder_seconds(self) -> float:
        return sum(m.encoder_seconds for m in self.members)

    def forward(self, *inputs: Tensor) -> Tuple[Tensor, Tensor]:
        """The members' start and end scores stacked: (readers, B, Lp) each."""
        scores = [m(*inputs) for m in self.members]
        return torch.stack([s for s, _ in scores]), torch.stack([e for _, e in scores])


def combine_scores(scores: Tensor) -> Tensor:
    """A reader's (B, Lp) scores as they are; an ensemble's (readers, B, Lp) as the log of the members' mean
    probability (padding keeps its large negative score: each member gives it probability 0)."""
    if scores.dim() == 2:
        return scores
    return torch.logsumexp(scores.float().log_softmax(-1), dim=0) - math.log(scores.shape[0])
