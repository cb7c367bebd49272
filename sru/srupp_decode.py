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

What a step costs beyond its products (``python -m bench.speed --decode`` measures it) is kept small
by two pieces. ``KeyStore``: a layer's cached keys and values as views of a buffer with room to grow. Why: with
``torch.cat`` every step copied all S cached positions (at B = 32, S = 64, proj 128: 2 MB a step,
more than the step's own products). Here a step writes only its new positions, in place, when the
cache it continues is the newest one made from that buffer (``end == buffer.used``); any other (a
cache decoded from twice, as beam search may) is copied into a fresh buffer, so no view handed out
is ever overwritten. A full buffer is replaced by a new one twice the live size (never compacted in
place, for the same reason), so a sliding window (``max_context``) costs O(1) a step amortized.

``direct_recurrence``: the layer's recurrence as one direct call of the fused CPU kernel
(``sru.ops.cpu.kernel.forward``), not through the autograd custom op: at one position the op's
dispatch and argument checks cost more than the recurrence. Anything the kernel does not take
(autocast, another backend or device, tracing, half precision) runs ``apply_recurrence`` as before;
both give the same numbers (the same kernel).
"""
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from sru.ops.backends import cpu_kernel, load_library
from sru.ops.precision import under_autocast
from sru.ops.tracing import eager_cpu
from sru.srupp_attention import SRUppAttention

_KERNEL_DTYPES = (torch.float32, torch.float64)


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
    def append(cls, store: Optional["KeyStore"], old_keys: Tensor, old_values: Tensor,
               keys: Tensor, values: Tensor, max_context: Optional[int]) -> "KeyStore":
        """The store of ``old_keys`` (the cache's, ``store`` when decode made it) followed by ``keys``."""
        new = keys.size(0)
        if (store is not None and old_keys is store.keys and old_values is store.values
                and store.end == store.buffer.used and store.end + new <= store.buffer.keys.size(0)
                and keys.dtype == old_keys.dtype and keys.shape[1:] == old_keys.shape[1:]):
            buffer, end = store.buffer, store.end + new
            buffer.keys[store.end:end].copy_(keys)
            buffer.values[store.end:end].copy_(values)
            buffer.used = end
            return cls(buffer, store.start, end)
        live = old_keys.size(0)
        need = live + new
        capacity = max(2 * need, 2 * (max_context or 0) + new, 16)
        buffer = _Buffer(keys.new_empty(capacity, *keys.shape[1:]), values.new_empty(capacity, *values.shape[1:]),
                         need)
        for target, old, fresh in ((buffer.keys, old_keys, keys), (buffer.values, old_values, values)):
            target[:live].copy_(old)
            target[live:need].copy_(fresh)
        return cls(buffer, 0, need)

    def keep(self, positions: int) -> Tuple[Tensor, Tensor]:
        """Only the last ``positions`` rows (a sliding window): the cache's keys and values."""
        if self.end - self.start > positions:
            self.start = self.end - positions
            self.keys, self.values = self.buffer.keys[self.start:self.end], self.buffer.values[self.start:self.end]
        return self.keys, self.values


def direct_recurrence(cell, U: Tensor, residual: Tensor, c0: Tensor) -> Tuple[Tensor, Tensor]:
    """(h, c) of ``cell.apply_recurrence(U, residual, c0, None, None)`` in eval mode without autograd."""
    dtype = U.dtype
    params = cell._parameters
    weight_c, bias = params["weight_c"], params["bias"]
    lib = None
    if (dtype in _KERNEL_DTYPES and not torch.is_grad_enabled() and not cell.training
            and cell.backend in ("auto", "cpu") and not under_autocast("cpu")
            and eager_cpu(U, residual) and residual.dtype == dtype == weight_c.dtype == bias.dtype == c0.dtype
            and weight_c.dim() == 1 and c0.is_cpu):
        lib = load_library()
    if lib is None:
        return cell.apply_recurrence(U, residual, c0, None, None)
    skip = cpu_kernel.skip_mode_of(cell)
    options = cpu_kernel.KernelOptions(cell.hidden_size, cell.num_directions, skip,
                                       bool(cell.activation_type), float(cell.skip_scale))
    inputs = (U.contiguous(), residual.contiguous() if skip == 1 else None, weight_c.contiguous(),
              bias.contiguous(), c0.contiguous(), None, None)
    h, c_last, _ = cpu_kernel.forward(lib, inputs, options, False)
    return h, c_last


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
    keys, values, stores, cs = [], [], [], []
    for i, cell in enumerate(model.rnn_lst._modules.values()):
        residual = x
        norm = cell._modules.get("layer_norm")
        if norm is not None and not cell.normalize_after:
            x = norm(x)
        attention = cell.transform_module
        if isinstance(attention, SRUppAttention):
            q, k, v, res = attention.query_key_value(x)
            store = KeyStore.append(cache.stores[i] if cache.stores else None, cache.keys[i],
                                    cache.values[i], k, v, max_context)
            k, v = store.keys, store.values  # the cached positions and the new ones
            U = attention.output(attention.attend(q, k, v, mask), res)
            if max_context is not None:
                k, v = store.keep(max_context)
        else:
            U, k, v, store = cell.compute_U(x), None, None, None
        h, c = direct_recurrence(cell, U, residual, cache.c[i])
        if norm is not None and cell.normalize_after:
            h = norm(h)
        x = h.to(residual.dtype)
        keys.append(k)
        values.append(v)
        stores.append(store)
        cs.append(c)
    return (x[0] if single else x), SRUppCache(keys, values, torch.stack(cs), stores)
