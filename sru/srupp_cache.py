"""SRU++ decoding's cache (``SRUppCache``): per layer the recurrent state c and the attention keys/values of
every position seen; sru.srupp_decode feeds it, sru.srupp_fused's one-call step too.

``KeyStore``: a layer's cached keys and values as views of a buffer with room to grow. Why: with
``torch.cat`` every step copied all S cached positions (at B = 32, S = 64, proj 128: 2 MB a step,
more than the step's own products). Here a step writes only its new positions, in place, when the
cache it continues is the newest one made from that buffer (``end == buffer.used``); any other (a
cache decoded from twice, as beam search may) is copied into a fresh buffer, so no view handed out
is ever overwritten. A full buffer is replaced by a new one twice the live size (never compacted in
place, for the same reason), so a sliding window (``max_context``) costs O(1) a step amortized.
"""
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from torch import Tensor

from sru.srupp_attention import SRUppAttention


class _Buffer:
    """Keys and values storage (capacity, B, proj) and how many rows are written."""
    __slots__ = ("keys", "values", "used")

    def __init__(self, keys: Tensor, values: Tensor, used: int):
        self.keys, self.values, self.used = keys, values, used


class KeyStore:
    """Rows ``start:end`` of a ``_Buffer``: one cache's keys and values of one layer."""
    __slots__ = ("buffer", "start", "end", "keys", "values")

    def __init__(self, buffer: _Buffer, start: int, end: int):
        self.buffer, self.start, self.end = buffer, start, end
        self.keys, self.values = buffer.keys[start:end], buffer.values[start:end]

    @classmethod
    def reserve(cls, store: Optional["KeyStore"], old_keys: Tensor, old_values: Tensor, like: Tensor, new: int,
                max_context: Optional[int]) -> "KeyStore":
        """The store of ``old_keys`` (the cache's, ``store`` when decode made it) followed by ``new`` rows
        shaped and typed as ``like``'s, which the caller writes (the last ``new`` rows of its views)."""
        if (store is not None and old_keys is store.keys and old_values is store.values
                and store.end == store.buffer.used and store.end + new <= store.buffer.keys.size(0)
                and like.dtype == old_keys.dtype and like.shape[1:] == old_keys.shape[1:]):
            store.buffer.used = store.end + new
            return cls(store.buffer, store.start, store.end + new)
        live = old_keys.size(0)
        need = live + new
        capacity = max(2 * need, 2 * (max_context or 0) + new, 16)
        buffer = _Buffer(like.new_empty(capacity, *like.shape[1:]), like.new_empty(capacity, *like.shape[1:]),
                         need)
        buffer.keys[:live].copy_(old_keys)
        buffer.values[:live].copy_(old_values)
        return cls(buffer, 0, need)

    @classmethod
    def append(cls, store: Optional["KeyStore"], old_keys: Tensor, old_values: Tensor,
               keys: Tensor, values: Tensor, max_context: Optional[int]) -> "KeyStore":
        """The store of ``old_keys`` followed by ``keys`` (and ``values``)."""
        new = keys.size(0)
        grown = cls.reserve(store, old_keys, old_values, keys, new, max_context)
        grown.buffer.keys[grown.end - new:grown.end].copy_(keys)
        grown.buffer.values[grown.end - new:grown.end].copy_(values)
        return grown

    def keep(self, positions: int) -> Tuple[Tensor, Tensor]:
        """Only the last ``positions`` rows (a sliding window): the cache's keys and values."""
        if self.end - self.start > positions:
            self.start = self.end - positions
            self.keys, self.values = self.buffer.keys[self.start:self.end], self.buffer.values[self.start:self.end]
        return self.keys, self.values


@dataclass
class SRUppCache:
    """Per layer: keys and values (S, B, proj) of the S positions seen (None for layers without
    attention), and c (layers, B, dirs*hidden_size) after the last position. ``stores``: where
    ``decode`` made them, the growing buffers they are views of (``KeyStore``), so
    that the next step appends in place instead of copying every cached position."""
    keys: List[Optional[Tensor]]
    values: List[Optional[Tensor]]
    c: Tensor
    stores: Optional[List[Optional[KeyStore]]] = field(default=None, repr=False, compare=False)

    @property
    def length(self) -> int:
        """Positions held (0 when no layer has attention)."""
        return next((k.size(0) for k in self.keys if k is not None), 0)

    def select(self, index: Tensor) -> "SRUppCache":
        """The cache of batch items ``index`` (beam search / dropping finished sequences)."""
        pick = (lambda t: None if t is None else t.index_select(1, index))
        return SRUppCache([pick(k) for k in self.keys], [pick(v) for v in self.values],
                          self.c.index_select(1, index))


def empty_cache(model, batch: int, like: Tensor) -> SRUppCache:
    """The cache before the first position: no keys or values, c zeros."""
    keys = [like.new_zeros(0, batch, model.proj_size)
            if isinstance(cell.transform_module, SRUppAttention) else None
            for cell in model.rnn_lst]
    c = like.new_zeros(model.num_layers, batch, model.output_size)
    return SRUppCache(keys, [None if k is None else k.clone() for k in keys], c)
