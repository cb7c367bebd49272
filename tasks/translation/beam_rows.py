"""What beam search reads of a decoding step's logits (search.py): each row's log-partition, the banned tokens
(<pad>, <s>) set to -inf, and the maximum of every run of tokens (``best_continuations``' bounds).

Search ranks ``scores + log p`` and keeps 2K continuations per sentence, and ``log p = logits - log_partition``
per row, so it never needs all N x V log-probabilities: ``torch.log_softmax`` wrote them (and the run maxima
read them again). ``beam_rows.cpp`` reads each row from memory once, as a C pass (native.py builds it on first
use); without it the same statistics come from torch ops (equal up to float rounding).
``python -m bench.translation.beam_rows`` times it (docs/design_notes.md#beam-search): the C pass is faster than
log_softmax + run maxima at every row count measured; the torch ops are the fallback, not a speed-up.
"""
from __future__ import annotations

import ctypes
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from tasks.translation.native import library

MAX_BANNED = 8  # beam_rows.cpp keeps the banned logits in a fixed array


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
        lib.translation_beam_rows(logits.data_ptr(), N, V, run, ids, len(banned), log_partition.data_ptr(),
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
