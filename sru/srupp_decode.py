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

What a step costs beyond its products (``python -m bench.speed --decode`` measures it): a single
position of float32 input on CPU runs as one C call for the whole stack where the model allows
(``sru.srupp_decoding.one_call``); everything else (chunks, float64, autocast, a layer forced to oneDNN, ...) runs the
reference step below, in torch ops. Both append keys and values in place (``sru.srupp_decoding.cache.KeyStore``).

``direct_recurrence``: the reference step's recurrence as one direct call of the fused CPU kernel
(``sru.ops.cpu.inference.recurrence``, with the arguments the SRU's inference plan reads:
``recurrence_args``), not through the autograd custom op: at one position the op's
dispatch and argument checks cost more than the recurrence. Anything the kernel does not take
(autocast, another backend or device, tracing, half precision) runs ``apply_recurrence`` as before;
both give the same numbers (the same kernel).
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from sru.srupp_decoding import one_call
from sru.ops.backends import cpu_inference, load_library
from sru.ops.precision import under_autocast
from sru.ops.tracing import eager_cpu
from sru.srupp_attention import SRUppAttention
from sru.srupp_decoding.cache import KeyStore, SRUppCache, empty_cache

__all__ = ["KeyStore", "SRUppCache", "cache_from_memory", "decode", "direct_recurrence", "empty_cache"]

_KERNEL_DTYPES = (torch.float32, torch.float64)


def direct_recurrence(cell, U: Tensor, residual: Tensor, c0: Tensor) -> Tuple[Tensor, Tensor]:
    """(h, c) of ``cell.apply_recurrence(U, residual, c0, None, None)`` in eval mode without autograd."""
    dtype = U.dtype
    layer = cpu_inference.recurrence_args(cell)
    weight_c, bias = layer[0], layer[1]
    lib = None
    if (dtype in _KERNEL_DTYPES and not torch.is_grad_enabled() and not cell.training
            and cell.backend in ("auto", "cpu") and not under_autocast("cpu")
            and eager_cpu(U, residual) and residual.dtype == dtype == weight_c.dtype == bias.dtype == c0.dtype
            and weight_c.dim() == 1 and c0.is_cpu):
        lib = load_library()
    if lib is None:
        return cell.apply_recurrence(U, residual, c0, None, None)
    layer = (weight_c.contiguous(), bias.contiguous(), *layer[2:])
    skip = residual.contiguous() if layer[5] == 1 else residual  # read only as the skip input
    return cpu_inference.recurrence(lib, layer, U.contiguous(), skip, c0.contiguous())


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


def decode(model, input: Tensor, cache: Optional[SRUppCache] = None,
           max_context: Optional[int] = None) -> Tuple[Tensor, SRUppCache]:
    """Feed ``input`` (L, B, input_size), or one step (B, input_size), after the positions in
    ``cache`` (None: start of the sequence). Returns h ((L, B, out) or (B, out)) and the new
    cache. ``max_context`` keeps only that many most recent keys/values in the returned cache
    (a sliding attention window, like Transformer-XL's mem_len); None keeps everything."""
    _check_decodable(model)
    single = input.dim() == 2
    if not (single or input.dim() == 3) or input.size(-1) != model.input_size:
        raise ValueError(f"SRUpp decoding expected input of shape (length, batch, "
                         f"{model.input_size}) or (batch, {model.input_size}), got {tuple(input.shape)}")
    length, batch = (1, input.size(0)) if single else (input.size(0), input.size(1))
    if cache is None:
        cache = empty_cache(model, batch, input)
    if cache.c.size(1) != batch:
        raise ValueError(f"SRUpp decoding expected a cache for batch {batch}, got one for "
                         f"batch {cache.c.size(1)}; use cache.select(index) to pick items")
    if length == 1:  # one position: one C call where the model allows (sru.srupp_decoding.one_call)
        fused = one_call.decode_step(model, input if single else input[0], cache, max_context)
        if fused is not None:
            return (fused[0] if single else fused[0].unsqueeze(0)), fused[1]
    with torch.no_grad():
        h, cache = _reference_step(model, input.unsqueeze(0) if single else input, cache, max_context)
    return (h[0] if single else h), cache


def _reference_step(model, x: Tensor, cache: SRUppCache, max_context: Optional[int]) -> Tuple[Tensor, SRUppCache]:
    """``decode`` of x (L, B, input_size) in torch ops (and one kernel call a layer for the recurrence)."""
    length = x.size(0)
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
            store = KeyStore.append(cache, i, k, v, max_context)
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
    return x, SRUppCache(keys, values, torch.stack(cs), stores)
