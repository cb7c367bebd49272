"""Two CPU kernels for decoding a sequence model step by step: beam search's pass over a step's logits
(``beam_rows``, beam_rows.cpp) and the attention of a few queries over cached keys (``attend``,
decode_attention.cpp). Both are built into one library on first use by the SRU kernel's build
(build.py ``load_or_build``: cached per source, flags, torch and CPU; published atomically;
``SRU_CPU_EXTENSION=0`` turns it off). Where it cannot be built: one warning, and the same results come from
torch ops (``beam_rows``) or the caller's ``F.scaled_dot_product_attention`` (``attend`` returns None).
Reached from outside ``sru/ops`` as ``sru.ops.backends.cpu_decoding``.

**Beam rows.** Beam search ranks ``scores + log p`` and keeps 2K continuations per sentence, and
``log p = logits - log_partition`` per row, so it never needs all N x V log-probabilities: ``torch.log_softmax``
wrote them (and the maxima of runs of tokens, which bound ``best_continuations``, read them again). The C pass
reads each row from memory once; ``torch_rows`` gives the same statistics (equal up to float rounding). The C pass
is faster than log_softmax + run maxima at every row count measured (``python -m bench.decoding.beam_rows``,
docs/design_notes.md#beam-search); the torch ops are the fallback, not a speed-up.

**Decode attention.** At a decoding step each (sentence, head) pair has a few queries (one per hypothesis) and
tens of cached keys. There ``F.scaled_dot_product_attention`` (the flash kernel: two small GEMMs per pair) spent
several times the time of reading the keys and values, which a real decode finds out of cache; the C kernel
streams each pair's keys and values once with its queries in registers and prefetches the next pair's
(``python -m bench.decoding.decode_attention``). ``attend`` takes the call only where the kernel is exact for it:
no autograd, float32 CPU tensors (bf16 under autocast keeps torch's kernel), a head size of 16, 32, 64 or 128, an
additive float mask or none, no dropout, not while compiling or exporting, and a build with AVX-512; otherwise
it returns None and the caller runs ``F.scaled_dot_product_attention`` (the reference the tests compare against).
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
import warnings
from pathlib import Path
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..tracing import exporting
from .build import load_or_build, short_log

SOURCES = tuple(Path(__file__).with_name(name) for name in ("beam_rows.cpp", "decode_attention.cpp"))
MAX_BANNED = 8  # beam_rows.cpp keeps the banned logits in a fixed array
HEAD_SIZES = (16, 32, 64, 128)
_lock = threading.Lock()
_loaded: dict = {}  # "library": the CDLL, or None once it failed (tried once per process)


def _open(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    pointer, integer, flag = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.sru_beam_rows.argtypes = [pointer, integer, integer, integer, pointer, integer, pointer, pointer, flag]
    lib.sru_beam_rows.restype = None
    lib.sru_decode_attention.argtypes = [pointer] * 5 + [integer] * 5 + [pointer] * 4 + [ctypes.c_float, flag]
    lib.sru_decode_attention.restype = flag
    lib.sru_decode_attention_available.restype = flag
    return lib


def _build_or_open() -> Optional[ctypes.CDLL]:
    if os.environ.get("SRU_CPU_EXTENSION", "1") == "0":
        return None
    try:
        return load_or_build("sru_decoding", SOURCES, _open)
    except Exception as exc:  # any build failure: the callers' torch ops give the same results
        warnings.warn(f"sru: could not build {', '.join(s.name for s in SOURCES)}, so beam search's row pass and "
                      f"decoding's attention use slower torch ops.\n  What failed: {short_log(exc)}\n  Fix: as for "
                      f"the SRU kernel (a C++ compiler with OpenMP and ninja); SRU_CPU_EXTENSION=0 silences this.",
                      RuntimeWarning, stacklevel=3)
        return None


def library() -> Optional[ctypes.CDLL]:
    """The compiled kernels, built on first use; None where they cannot be built."""
    if "library" not in _loaded:
        with _lock:
            if "library" not in _loaded:
                _loaded["library"] = _build_or_open()
    return _loaded["library"]


def beam_rows(logits: Tensor, banned: Sequence[int], run: int) -> Tuple[Tensor, Optional[Tensor]]:
    """logits (N, V) float32 -> (log_partition (N,) over the whole row, the maxima of its runs of ``run`` tokens
    (N, V // run) after ``banned`` are set to -inf in place; None when ``run`` does not divide V)."""
    N, V = logits.shape
    banned = sorted(set(int(b) for b in banned))
    lib = None if V % run or len(banned) > MAX_BANNED or logits.requires_grad else library()
    if lib is not None and logits.dtype == torch.float32 and logits.is_cpu and logits.is_contiguous():
        log_partition = torch.empty(N, dtype=torch.float32)
        run_max = torch.empty(N, V // run, dtype=torch.float32)
        ids = (ctypes.c_int64 * len(banned))(*banned)
        lib.sru_beam_rows(logits.data_ptr(), N, V, run, ids, len(banned), log_partition.data_ptr(),
                          run_max.data_ptr(), torch.get_num_threads())
        return log_partition, run_max
    return torch_rows(logits, banned, run)


def torch_rows(logits: Tensor, banned: Sequence[int], run: int) -> Tuple[Tensor, Optional[Tensor]]:
    """``beam_rows`` as torch ops (where the C pass is not built, or the logits are not float32 contiguous CPU)."""
    N, V = logits.shape
    top = logits.amax(1, keepdim=True)
    log_partition = torch.sub(logits, top).exp_().sum(1).log_().add_(top.squeeze(1))
    logits[:, list(banned)] = float("-inf")
    return log_partition, (None if V % run else logits.view(N, V // run, run).amax(-1))


@functools.lru_cache(maxsize=None)  # asked at every attention call; the library is built or not once per process
def attention_kernel():
    """The built library holding the attention kernel, or None where it cannot run here (no build, no AVX-512)."""
    lib = library()
    return lib if lib is not None and lib.sru_decode_attention_available() else None


def eligible(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor]) -> bool:
    """Whether ``attend`` runs these tensors (module docstring)."""
    tensors = (q, k, v) if mask is None else (q, k, v, mask)
    return (not torch.is_grad_enabled() and q.dim() == 4 and q.size(-1) in HEAD_SIZES
            and k.shape == v.shape and k.dim() == 4 and k.shape[:2] == q.shape[:2] and k.size(-1) == q.size(-1)
            and all(t.dtype == torch.float32 and t.is_cpu and type(t) is Tensor for t in tensors)
            and all(t.stride(-1) == 1 for t in (q, k, v)) and (mask is None or mask.dim() == 4)
            and not torch.compiler.is_compiling() and not exporting() and attention_kernel() is not None)


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
    done = attention_kernel().sru_decode_attention(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), None if full is None else full.data_ptr(), out.data_ptr(),
        G, H, Q, W, D, strides(q), strides(k), strides(v), None if full is None else strides(full),
        1.0 / math.sqrt(D), torch.get_num_threads())
    return out if done else None
