"""SRU++ decoding's cache (``SRUppCache``): per layer the recurrent state c and the attention keys/values of
every position seen; sru.srupp_decode feeds it, sru.srupp_decoding.one_call's one-call step too.

``KeyStore``: a layer's cached keys and values as views of a buffer with room to grow. Why: with
``torch.cat`` every step copied all S cached positions (at B = 32, S = 64, proj 128: 2 MB a step,
more than the step's own products). Here a step writes only its new positions, in place, when the
cache it continues is the newest one made from that buffer (``end == buffer.used``); any other (a
cache decoded from twice, as beam search may) is copied into a fresh buffer, so no view handed out
is ever overwritten. A full buffer is replaced by a new one twice the live size (never compacted in
place, for the same reason), so a sliding window (``max_context``) costs O(1) a step amortized.
"""
from typing import List, Optional, Tuple

from torch import Tensor

from sru.srupp_attention import SRUppAttention


class _Buffer:
    """Keys and values storage (capacity, B, proj) and how many rows are written; their capacity, dtype,
    addresses and row size as Python values, which a step reads without touching the tensors."""
    __slots__ = ("keys", "values", "used", "capacity", "dtype", "key_address", "value_address", "row_bytes")

    def __init__(self, keys: Tensor, values: Tensor, used: int):
        self.keys, self.values, self.used = keys, values, used
        self.capacity, self.dtype = keys.size(0), keys.dtype
        self.key_address, self.value_address = keys.data_ptr(), values.data_ptr()
        self.row_bytes = keys.stride(0) * keys.element_size()


class KeyStore:
    """Rows ``start:end`` of a ``_Buffer``: one cache's keys and values of one layer. Its views (``keys``,
    ``values``) are made on first use: the one-call step (sru.srupp_decoding.one_call) hands the C code
    addresses, and two slices a layer were a visible share of that step."""
    __slots__ = ("buffer", "start", "end", "first", "_views")

    def __init__(self, buffer: _Buffer, start: int, end: int, first: Optional[int] = None):
        self.buffer, self.start, self.end, self._views = buffer, start, end, None
        self.first = start if first is None else first  # reserve: the first row the new positions attend

    def views(self) -> Tuple[Tensor, Tensor]:
        """(keys, values): rows ``start:end`` of the buffer, the same two tensors on every call."""
        if self._views is None:
            self._views = (self.buffer.keys[self.start:self.end], self.buffer.values[self.start:self.end])
        return self._views

    @property
    def keys(self) -> Tensor:
        return self.views()[0]

    @property
    def values(self) -> Tensor:
        return self.views()[1]

    @classmethod
    def reserve(cls, cache: "SRUppCache", layer: int, like: Optional[Tensor], new: int,
                max_context: Optional[int], window: Optional[int] = None) -> "KeyStore":
        """The store of ``cache``'s keys and values of ``layer`` followed by ``new`` rows (shaped and typed as
        ``like``'s; None: as the cache's), which the caller writes: the buffer's rows ``end - new`` to ``end``.
        ``window``: the store keeps only its last ``window`` rows (``keep`` without a second pair of views;
        the rows before stay in the buffer, where the caller may still read them this step)."""
        store = cache.own_store(layer)
        if store is not None:
            buffer, end = store.buffer, store.end + new
            if (end - new == buffer.used and end <= buffer.capacity
                    and (like is None or (like.dtype is buffer.dtype
                                          and like.shape[1:] == buffer.keys.shape[1:]))):
                buffer.used = end
                return cls(buffer, store.start if window is None else max(store.start, end - window), end,
                           store.start)
        old_keys, old_values = cache.keys[layer], cache.values[layer]
        like = old_keys if like is None else like
        live = old_keys.size(0)
        need = live + new
        capacity = max(2 * need, 2 * (max_context or 0) + new, 16)
        buffer = _Buffer(like.new_empty(capacity, *like.shape[1:]), like.new_empty(capacity, *like.shape[1:]),
                         need)
        buffer.keys[:live].copy_(old_keys)
        buffer.values[:live].copy_(old_values)
        return cls(buffer, 0 if window is None else max(0, need - window), need, 0)

    @classmethod
    def append(cls, cache: "SRUppCache", layer: int, keys: Tensor, values: Tensor,
               max_context: Optional[int]) -> "KeyStore":
        """The store of ``cache``'s keys and values of ``layer`` followed by ``keys`` (and ``values``)."""
        new = keys.size(0)
        grown = cls.reserve(cache, layer, keys, new, max_context)
        grown.buffer.keys[grown.end - new:grown.end].copy_(keys)
        grown.buffer.values[grown.end - new:grown.end].copy_(values)
        return grown

    def keep(self, positions: int) -> Tuple[Tensor, Tensor]:
        """Only the last ``positions`` rows (a sliding window): the cache's keys and values."""
        if self.end - self.start > positions:
            self.start, self._views = self.end - positions, None
        return self.views()


class SRUppCache:
    """Per layer: keys and values (S, B, proj) of the S positions seen (None for layers without
    attention), and c (layers, B, dirs*hidden_size) after the last position. ``stores``: where
    ``decode`` made them, the growing buffers they are views of (``KeyStore``), so that the next step
    appends in place instead of copying every cached position; the keys and values are then read from the
    stores on first use (``keys=None``)."""

    def __init__(self, keys: Optional[List[Optional[Tensor]]], values: Optional[List[Optional[Tensor]]],
                 c: Tensor, stores: Optional[List[Optional[KeyStore]]] = None):
        self._keys, self._values, self.c, self.stores = keys, values, c, stores

    keys = property(lambda self: self._read("keys"), lambda self, keys: setattr(self, "_keys", keys))
    values = property(lambda self: self._read("values"), lambda self, values: setattr(self, "_values", values))

    def _read(self, kind: str) -> List[Optional[Tensor]]:
        """The cache's keys or values (``kind``), made from the stores' buffers on first read."""
        made = getattr(self, "_" + kind)
        if made is None:
            made = [None if store is None else getattr(store, kind) for store in self.stores]
            setattr(self, "_" + kind, made)
        return made

    def own_store(self, layer: int) -> Optional[KeyStore]:
        """The store of ``layer`` while the cache's keys and values are still its views (decode made them)."""
        store = self.stores[layer] if self.stores else None
        if store is None or (self._keys is None and self._values is None):
            return store
        keys, values = store.views()
        return store if self.keys[layer] is keys and self.values[layer] is values else None

    @property
    def length(self) -> int:
        """Positions held (0 when no layer has attention)."""
        return next((k.size(0) for k in self.keys if k is not None), 0)

    def select(self, index: Tensor) -> "SRUppCache":
        """The cache of batch items ``index`` (beam search / dropping finished sequences)."""
        pick = (lambda t: None if t is None else t.index_select(1, index))
        return SRUppCache([pick(k) for k in self.keys], [pick(v) for v in self.values],
                          self.c.index_select(1, index))

    def __repr__(self) -> str:
        return f"SRUppCache(length={self.length}, c={tuple(self.c.shape)})"


def empty_cache(model, batch: int, like: Tensor) -> SRUppCache:
    """The cache before the first position: no keys or values, c zeros."""
    keys = [like.new_zeros(0, batch, model.proj_size)
            if isinstance(cell.transform_module, SRUppAttention) else None
            for cell in model.rnn_lst]
    c = like.new_zeros(model.num_layers, batch, model.output_size)
    return SRUppCache(keys, [None if k is None else k.clone() for k in keys], c)
