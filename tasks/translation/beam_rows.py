"""What beam search reads of a decoding step's logits (search.py): each row's log-partition, the banned tokens
(<pad>, <s>) set to -inf, and the maximum of every run of tokens (``best_continuations``' bounds).

Search ranks ``scores + log p`` and keeps 2K continuations per sentence, and ``log p = logits - log_partition``
per row, so it never needs all N x V log-probabilities: ``torch.log_softmax`` wrote them (and the run maxima
read them again). ``beam_rows.cpp`` reads each row from memory once, as a C pass built on first use with the
layer's kernel build (sru.ops.cpu.build: cached, atomic, ``SRU_CPU_EXTENSION=0`` turns it off); without it the
same statistics come from torch ops (equal up to float rounding). Measured on 1,080 rows x 4,000 words, one
thread (docs/benchmarks.md, "Beam search reads its logits once"): log_softmax + run maxima 6.3-10.0 ms, torch
ops 5.8-8.0 ms, the C pass 4.5-5.3 ms.
"""
from __future__ import annotations

import ctypes
import os
import threading
import warnings
from pathlib import Path
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from sru.ops.cpu.build import build_extension, cache_root, extension_name, short_log

SOURCE = Path(__file__).with_name("beam_rows.cpp")
MAX_BANNED = 8  # beam_rows.cpp keeps the banned logits in a fixed array
_lock = threading.Lock()
_loaded: dict = {}  # "library": the CDLL, or None once it failed (tried once per process)


def _open(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    pointer, integer = ctypes.c_void_p, ctypes.c_int64
    lib.sru_beam_rows.argtypes = [pointer, integer, integer, integer, pointer, integer, pointer, pointer, ctypes.c_int]
    lib.sru_beam_rows.restype = None
    return lib


def _build_or_open() -> Optional[ctypes.CDLL]:
    if os.environ.get("SRU_CPU_EXTENSION", "1") == "0":
        return None
    name = extension_name("sru_beam_rows", (SOURCE,))
    target = cache_root() / name / (name + ".so")
    try:
        if target.exists():
            try:
                return _open(target)
            except OSError:
                pass  # unreadable or half-written by a killed process: build it again
        build_extension(target, (SOURCE,))
        return _open(target)
    except Exception as exc:  # any build failure: the torch ops below give the same statistics
        warnings.warn(f"translation: could not build {SOURCE.name}, so beam search uses slower torch ops.\n"
                      f"  What failed: {short_log(exc)}\n  Fix: as for the SRU kernel (a C++ compiler with "
                      f"OpenMP and ninja); SRU_CPU_EXTENSION=0 silences this.", RuntimeWarning, stacklevel=3)
        return None


def library() -> Optional[ctypes.CDLL]:
    """The compiled pass, built on first use; None where it cannot be built."""
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
