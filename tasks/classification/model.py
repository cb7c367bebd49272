"""Sentence classifier: embedding -> shared encoder (sru / lstm / cnn) -> pooling -> dropout -> linear.

As in the paper's classification script, dropout is applied to the word embeddings and to the pooled
sentence vector; the encoder's own dropout comes from the model config.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

POOLINGS = ("auto", "last", "mean", "max")


def pool(out: Tensor, mask_pad: Tensor, lengths: Tensor, how: str, bidirectional: bool) -> Tensor:
    """Reduce encoder outputs (L, B, H) to (B, H) using only real (non-pad) positions.

    "last": the hidden state at each sentence's last real token; for a bidirectional encoder the forward
    half is read there and the backward half at position 0 (where the backward pass ends).
    """
    if how == "last":
        idx = (lengths - 1).clamp_min(0).view(1, -1, 1).expand(1, out.size(1), out.size(2))
        last = out.gather(0, idx).squeeze(0)
        if not bidirectional:
            return last
        half = out.size(2) // 2
        return torch.cat([last[:, :half], out[0, :, half:]], dim=1)
    real = (~mask_pad).unsqueeze(-1)
    if how == "mean":
        return (out * real).sum(0) / real.sum(0).clamp_min(1)
    if how == "max":
        return out.masked_fill(~real, float("-inf")).max(0).values
    raise ValueError(f"task.pooling: expected one of {list(POOLINGS)}, received {how!r}")


class SentenceClassifier(nn.Module):
    def __init__(self, embedding: Tensor, encoder: nn.Module, num_classes: int, dropout: float = 0.5,
                 pooling: str = "auto", bidirectional: bool = False, fix_embedding: bool = False):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"task.pooling: expected one of {list(POOLINGS)}, received {pooling!r}")
        self.embedding = nn.Embedding.from_pretrained(embedding.clone(), freeze=fix_embedding, padding_idx=0)
        self.encoder = encoder
        self.pooling = getattr(encoder, "preferred_pooling", "last") if pooling == "auto" else pooling
        self.bidirectional = bidirectional
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(encoder.output_size, num_classes)

    def forward(self, tokens: Tensor, mask_pad: Tensor, lengths: Optional[Tensor] = None) -> Tensor:
        """tokens (L, B) ids, mask_pad (L, B) true on padding -> logits (B, num_classes)."""
        if lengths is None:
            lengths = (~mask_pad).sum(0)
        emb = self.dropout(self.embedding(tokens))
        out, _ = self.encoder(emb, None, mask_pad=mask_pad)
        return self.out(self.dropout(pool(out, mask_pad, lengths, self.pooling, self.bidirectional)))
