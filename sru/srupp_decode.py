"""Incremental (token-by-token or chunked) SRU++ decoding with a key/value cache.

A causal SRU++ stack needs, to go on from position t, only per layer the recurrent state c and
the attention keys/values of every earlier position (U at a position depends on the queries of
that position and the keys/values of the positions it can see; see sru.srupp_attention).
``SRUppCache`` holds exactly that; ``decode`` feeds a chunk of L >= 1 new positions, attending
causally within the chunk and fully to the cache, and returns the chunk's h and the grown
cache. Feeding a sequence in any split (one prefill chunk, then single tokens) gives the same h
as ``SRUpp.forward`` on the whole sequence with a causal ``attn_mask``
(tests/test_srupp_decode.py).

``cache_from_memory`` starts a cache from a previous segment's ``saved_inputs`` and c, so that
decoding continues exactly as ``SRUpp.forward(segment, c0=c, memory=saved_inputs, attn_mask=
causal)`` (Transformer-XL style streaming evaluation). Note the official layout's quirk kept
here: with ``layer_norm=True, normalize_after=False`` a layer's memory enters its attention
without the layer's pre-norm, while its own input is normalized.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from sru.srupp_attention import SRUppAttention


@dataclass
class SRUppCache:
    """Per layer: keys and values (S, B, proj) of the S positions seen (None for layers without
    attention), and c (layers, B, dirs*hidden_size) after the last position."""
    keys: List[Optional[Tensor]]
    values: List[Optional[Tensor]]
    c: Tensor

    @property
    def length(self) -> int:
        """Positions held (0 when no layer has attention)."""
        return next((k.size(0) for k in self.keys if k is not None), 0)

    def select(self, index: Tensor) -> "SRUppCache":
        """The cache of batch items ``index`` (beam search / dropping finished sequences)."""
        pick = (lambda t: None if t is None else t.index_select(1, index))
        return SRUppCache([pick(k) for k in self.keys], [pick(v) for v in self.values],
                          self.c.index_select(1, index))


def _check_decodable(model) -> None:
    if model.bidirectional:
        raise ValueError("SRUpp decoding needs a unidirectional model (bidirectional=False): a "
                         "backward direction would need the future")
    if model.training:
        raise ValueError("SRUpp decoding expected the model in eval mode (dropout masks would "
                         "differ from the full forward); call model.eval()")


def _causal(length: int, cached: int, like: Tensor) -> Optional[Tensor]:
    """Additive (length, cached + length) mask: new position t sees the cache and steps <= t."""
    if length == 1:
        return None
    hidden = torch.ones(length, cached + length, dtype=torch.bool, device=like.device).triu(cached + 1)
    return torch.zeros(hidden.shape, dtype=like.dtype, device=like.device).masked_fill(hidden, float("-inf"))


@torch.no_grad()
def cache_from_memory(model, saved_inputs: List[Tensor], c: Tensor) -> SRUppCache:
    """The cache after a segment whose ``SRUpp.forward`` returned c and ``saved_inputs``."""
    _check_decodable(model)
    keys, values = [], []
    for cell, memory in zip(model.rnn_lst, saved_inputs):
        attention = cell.transform_module
        if isinstance(attention, SRUppAttention):
            _, k, v, _ = attention.query_key_value(memory)  # memory is not pre-normed (official)
            keys.append(k)
            values.append(v)
        else:
            keys.append(None)
            values.append(None)
    return SRUppCache(keys, values, c)


def empty_cache(model, batch: int, like: Tensor) -> SRUppCache:
    keys = [like.new_zeros(0, batch, model.proj_size)
            if isinstance(cell.transform_module, SRUppAttention) else None
            for cell in model.rnn_lst]
    c = like.new_zeros(model.num_layers, batch, model.output_size)
    return SRUppCache(keys, [None if k is None else k.clone() for k in keys], c)


@torch.no_grad()
def decode(model, input: Tensor, cache: Optional[SRUppCache] = None,
           max_context: Optional[int] = None) -> Tuple[Tensor, SRUppCache]:
    """Feed ``input`` (L, B, input_size), or one step (B, input_size), after the positions in
    ``cache`` (None: start of the sequence). Returns h ((L, B, out) or (B, out)) and the new
    cache. ``max_context`` keeps only that many most recent keys/values in the returned cache
    (a sliding attention window, like Transformer-XL's mem_len); None keeps everything."""
    _check_decodable(model)
    single = input.dim() == 2
    x = input.unsqueeze(0) if single else input
    if x.dim() != 3 or x.size(-1) != model.input_size:
        raise ValueError(f"SRUpp decoding expected input of shape (length, batch, "
                         f"{model.input_size}) or (batch, {model.input_size}), got {tuple(input.shape)}")
    length, batch = x.size(0), x.size(1)
    if cache is None:
        cache = empty_cache(model, batch, x)
    if cache.c.size(1) != batch:
        raise ValueError(f"SRUpp decoding expected a cache for batch {batch}, got one for "
                         f"batch {cache.c.size(1)}; use cache.select(index) to pick items")
    if model.input_to_hidden is not None:
        x = model.input_to_hidden(x)
    mask = _causal(length, cache.length, x)
    keys, values, cs = [], [], []
    for i, cell in enumerate(model.rnn_lst):
        residual = x
        if cell.layer_norm is not None and not cell.normalize_after:
            x = cell.layer_norm(x)
        attention = cell.transform_module
        if isinstance(attention, SRUppAttention):
            q, k, v, res = attention.query_key_value(x)
            k, v = torch.cat([cache.keys[i], k]), torch.cat([cache.values[i], v])
            U = attention.output(attention.attend(q, k, v, mask), res)
            if max_context is not None:
                k, v = k[-max_context:], v[-max_context:]
        else:
            U, k, v = cell.compute_U(x), None, None
        h, c = cell.apply_recurrence(U, residual, cache.c[i], None, None)
        if cell.layer_norm is not None and cell.normalize_after:
            h = cell.layer_norm(h)
        x = h.to(residual.dtype)
        keys.append(k)
        values.append(v)
        cs.append(c)
    return (x[0] if single else x), SRUppCache(keys, values, torch.stack(cs))
