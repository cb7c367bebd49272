"""A Transformer stack as a shared encoder: the attention-only baseline that SRU++ is measured against.

Pre-norm blocks (x + attention(LN(x)), x + FFN(LN(x)), a final LN), positions by ALiBi (Press et al.,
"Train Short, Test Long", arXiv 2108.12409: each head adds -slope * distance to its attention scores, no
position embeddings). ALiBi only sees distances, so Transformer-XL-style segment memory needs no relative
position machinery: the memory keys are simply further away. State between calls is ``memory``, per layer
the inputs of the most recent positions (as SRU++'s ``saved_inputs``, tasks/common/srupp_encoder.py);
``mem_len`` keeps that many (null: exactly the previous call's positions, 0: none). A causal encoder
(``causal=True``: language models) hides the future; otherwise attention is two-sided (|distance|).

``step`` feeds one position and keeps every earlier one as memory (up to ``mem_len`` when it is set), so
decoding token by token gives the logits of one causal forward over the whole prefix.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.rnn_encoders import check_input, reorder_state
from tasks.common.srupp_encoder import check_mem_len, next_memory


def alibi_slopes(num_heads: int) -> Tensor:
    """The ALiBi paper's head slopes: a geometric sequence from 2^(-8/n) (exact for powers of two, the
    paper's interpolation otherwise)."""
    def power_of_two(n: int) -> List[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]
    if math.log2(num_heads).is_integer():
        return torch.tensor(power_of_two(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(power_of_two(closest) + power_of_two(2 * closest)[0::2][: num_heads - closest])


def attention_bias(slopes: Tensor, length: int, mem_len: int, causal: bool, like: Tensor) -> Tensor:
    """(heads, L, M + L) additive float bias: -slope * distance, -inf on the future when causal."""
    query = torch.arange(mem_len, mem_len + length, device=like.device).unsqueeze(1)
    key = torch.arange(mem_len + length, device=like.device).unsqueeze(0)
    distance = (query - key).to(like.dtype)
    bias = -slopes.to(like).view(-1, 1, 1) * distance.abs()
    if causal:
        bias = bias.masked_fill(key > query, float("-inf"))
    return bias


class TransformerBlock(nn.Module):
    def __init__(self, width: int, num_heads: int, ffn_size: int, dropout: float, attn_dropout: float):
        super().__init__()
        if width % num_heads:
            raise ValueError(f"model.hidden_size={width} must be a multiple of model.num_heads={num_heads}")
        self.num_heads, self.attn_dropout = num_heads, attn_dropout
        self.attn_norm = nn.LayerNorm(width)
        self.query = nn.Linear(width, width)
        self.key_value = nn.Linear(width, 2 * width)
        self.attn_out = nn.Linear(width, width)
        self.ffn_norm = nn.LayerNorm(width)
        self.ffn_in = nn.Linear(width, ffn_size)
        self.ffn_out = nn.Linear(ffn_size, width)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, x: Tensor) -> Tensor:  # (T, B, d) -> (B, heads, T, d / heads)
        return x.reshape(x.size(0), x.size(1), self.num_heads, -1).permute(1, 2, 0, 3)

    def forward(self, x: Tensor, memory: Optional[Tensor], bias: Tensor) -> Tensor:
        context = x if memory is None else torch.cat([memory, x])
        normed = self.attn_norm(context)
        query = self._heads(self.query(normed[context.size(0) - x.size(0):]))
        key, value = (self._heads(t) for t in self.key_value(normed).chunk(2, dim=-1))
        attended = F.scaled_dot_product_attention(query, key, value, attn_mask=bias,
                                                  dropout_p=self.attn_dropout if self.training else 0.0)
        x = x + self.dropout(self.attn_out(attended.permute(2, 0, 1, 3).reshape(x.shape)))
        return x + self.dropout(self.ffn_out(self.dropout(F.relu(self.ffn_in(self.ffn_norm(x))))))


class TransformerLMEncoder(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, num_heads: int = 4,
                 ffn_size: int = 0, dropout: float = 0.1, attn_dropout: float = 0.0,
                 mem_len: Optional[int] = None, bidirectional: bool = False, causal: bool = False):
        super().__init__()
        if bidirectional:
            raise ValueError("model.bidirectional=true: a Transformer's attention is already two-sided "
                             "(non-causal tasks); set model.bidirectional=false")
        check_mem_len(mem_len)
        self.input_size, self.output_size = input_size, hidden_size
        self.num_layers, self.bidirectional = num_layers, False
        self.mem_len, self.causal = mem_len, causal
        self.input_proj = nn.Linear(input_size, hidden_size) if input_size != hidden_size else None
        self.layers = nn.ModuleList(
            TransformerBlock(hidden_size, num_heads, ffn_size or 4 * hidden_size, dropout, attn_dropout)
            for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(hidden_size)
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def forward(self, x: Tensor, state: Any = None, mask_pad: Optional[Tensor] = None,
                return_all_layers: bool = False):
        check_input(x, self.input_size, "Transformer encoder")
        memory = state
        if memory is not None and mask_pad is not None:
            raise ValueError("Transformer encoder: segment memory with padded batches is not supported; "
                             "pass mask_pad only without a carried state (or set model.mem_len=0)")
        h = x if self.input_proj is None else self.input_proj(x)
        mem_len = 0 if memory is None else memory[0].size(0)
        bias = attention_bias(self.slopes, x.size(0), mem_len, self.causal, h)
        if mask_pad is not None:  # (L, B) true on padding: no query attends to a padded key
            bias = bias.unsqueeze(0).masked_fill(mask_pad.t().view(x.size(1), 1, 1, -1), float("-inf"))
        inputs, outputs = [], []
        for i, layer in enumerate(self.layers):
            inputs.append(h)
            h = layer(h, None if memory is None else memory[i], bias)
            outputs.append(h)
        out = self.final_norm(h)
        if mask_pad is not None:
            out = out.masked_fill(mask_pad.unsqueeze(-1), 0.0)
        new_state = next_memory(memory, inputs, self.mem_len)
        return (outputs[:-1] + [out] if return_all_layers else out), new_state

    def step(self, x_t: Tensor, state: Any = None):
        """One position: x_t (B, D) -> (h_t (B, output_size), memory with this position added; at most
        ``mem_len`` positions when it is set, else all of them)."""
        if not self.causal:
            raise ValueError("step(): needs a causal Transformer encoder (a causal task)")
        h = x_t.unsqueeze(0)
        h = h if self.input_proj is None else self.input_proj(h)
        bias = attention_bias(self.slopes, 1, 0 if state is None else state[0].size(0), True, h)
        kept = []
        for i, layer in enumerate(self.layers):
            kept.append(h if state is None else torch.cat([state[i], h])[-(self.mem_len or 0):])
            h = layer(h, None if state is None else state[i], bias)
        return self.final_norm(h)[0], tuple(kept)

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        return reorder_state(state, index)
