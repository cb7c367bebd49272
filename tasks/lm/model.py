"""Word/char language model: embedding -> shared encoder (SRU or LSTM) -> tied softmax.

Follows the official SRU PTB setup: dropout on the embeddings and before the softmax, input and
output embeddings tied (a linear projection is inserted when the encoder width differs).
"""
from __future__ import annotations

from typing import Any, Mapping

from torch import Tensor, nn

from sru.linear import DispatchedLinear
from tasks.common.encoders import build_encoder


class LanguageModel(nn.Module):
    def __init__(self, vocab_size: int, emb_size: int, encoder_cfg: Mapping[str, Any],
                 emb_dropout: float = 0.0, out_dropout: float = 0.0, tie_weights: bool = True):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_size)
        self.emb_dropout = nn.Dropout(emb_dropout)
        self.encoder = build_encoder(encoder_cfg, emb_size, causal=True)
        width = self.encoder.output_size
        self.out_dropout = nn.Dropout(out_dropout)
        # Tying needs the decoder input to have the embedding width.
        self.proj = nn.Linear(width, emb_size) if tie_weights and width != emb_size else None
        # the softmax GEMM through sru's CPU dispatch (MKL or oneDNN, the faster: docs/ops.md)
        self.decoder = DispatchedLinear(emb_size if tie_weights else width, vocab_size)
        # Same range as the official LM script: U(±sqrt(3/d)), zero output bias.
        bound = (3.0 / emb_size) ** 0.5
        nn.init.uniform_(self.embed.weight, -bound, bound)
        nn.init.zeros_(self.decoder.bias)
        if tie_weights:
            self.decoder.weight = self.embed.weight

    def forward(self, tokens: Tensor, state: Any = None):
        """tokens (L, B) -> logits (L, B, V), new encoder state."""
        x = self.emb_dropout(self.embed(tokens))
        h, state = self.encoder(x, state)
        h = self.out_dropout(h)
        if self.proj is not None:
            h = self.proj(h)
        return self.decoder(h), state
