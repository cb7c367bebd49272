"""Scaled dot-product attention for decoding steps, through ``decode_attention.cpp`` (built by native.py).

At a decoding step each (sentence, head) pair has a few queries (one per hypothesis) and tens of cached keys.
There ``F.scaled_dot_product_attention`` (the flash kernel: two small GEMMs per pair) spent several times the time of
reading the keys and values, which a real decode finds out of cache; the C kernel streams each pair's keys
and values once with its queries in registers and prefetches the next pair's (docs/benchmarks.md, "Decode
attention"). ``attend`` takes the call only where the kernel is exact for it: no autograd, float32 CPU
tensors (bf16 under autocast keeps torch's kernel), a head size of 16, 32, 64 or 128, an additive float mask
or none, no dropout, not while compiling or exporting, and a build with AVX-512; otherwise it returns None
and the caller runs ``F.scaled_dot_product_attention`` (the reference the tests compare against).
"""
from __future__ import annotations

import ctypes
import functools
import math
from typing import Optional

import torch
from torch import Tensor

from sru.ops.tracing import exporting
from tasks.translation.native import library

HEAD_SIZES = (16, 32, 64, 128)


@functools.lru_cache(maxsize=None)  # asked at every attention call; the library is built or not once per process
def kernel():
    """The built library holding the attention kernel, or None where it cannot run here (no build, no AVX-512)."""
    lib = library()
    return lib if lib is not None and lib.translation_decode_attention_available() else None


def eligible(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor]) -> bool:
    """Whether ``attend`` runs these tensors (module docstring)."""
    tensors = (q, k, v) if mask is None else (q, k, v, mask)
    return (not torch.is_grad_enabled() and q.dim() == 4 and q.size(-1) in HEAD_SIZES
            and k.shape == v.shape and k.dim() == 4 and k.shape[:2] == q.shape[:2] and k.size(-1) == q.size(-1)
            and all(t.dtype == torch.float32 and t.is_cpu and type(t) is Tensor for t in tensors)
            and all(t.stride(-1) == 1 for t in (q, k, v)) and (mask is None or mask.dim() == 4)
            and not torch.compiler.is_compiling() and not exporting() and kernel() is not None)


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None) -> Optional[Tensor]:
    """``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` for q (G, H, Q, D), k / v (G, H, W, D) and
    an additive mask broadcastable to (G, H, Q, W), by the C kernel; None where it does not apply (``eligible``).
    A query that may read no key gets zeros (torch's kernel gives NaN)."""
    if not eligible(q, k, v, mask):
        return None
    G, H, Q, D = q.shape
    W = k.size(2)
    strides = lambda t: (ctypes.c_int64 * 4)(*t.stride())  # noqa: E731
    full = None if mask is None else mask.expand(G, H, Q, W)  # broadcast dimensions get stride 0
    out = torch.empty(G, H, Q, D, dtype=torch.float32)
    done = kernel().translation_decode_attention(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), None if full is None else full.data_ptr(), out.data_ptr(),
        G, H, Q, W, D, strides(q), strides(k), strides(v), None if full is None else strides(full),
        1.0 / math.sqrt(D), torch.get_num_threads())
    return out if done else None
