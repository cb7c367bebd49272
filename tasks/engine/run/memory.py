"""``trainer.keep_freed_memory`` (docs/design_notes.md#freed-memory-kept-for-reuse): glibc's malloc keeps memory a
tensor freed for the next tensor instead of handing it back to the system at once.

Why: by default glibc serves a large allocation (above a threshold that adapts, from 128 KB up to 32 MB) from
pages it maps afresh, and it trims the top of its heap whenever more than twice that threshold lies free. A
decode step allocates a few outputs of several MB (1,080 hypotheses x 4,000 words: 17 MB) and frees them
together, so the next step faulted their pages in again, each zeroed by the kernel. What it saves:
docs/speed/task_throughput.md, the `trainer.keep_freed_memory` row.

Setting it fixes both thresholds (glibc then stops adapting them): allocations up to 32 MB (glibc's largest
threshold on 64-bit) come from the heap, and freed memory is trimmed only beyond 1 GB. It is process-wide and
stays set for the process's life (the process peak stays mapped, as a framework's caching allocator would keep
it). Elsewhere than glibc (musl, macOS, Windows) it does nothing.
"""
from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): larger values are refused
TRIM_THRESHOLD = 1 << 30

_kept = [False]


def keep_freed_memory() -> bool:
    """Keep freed memory for reuse (module docstring), once per process; whether it is in effect."""
    if not _kept[0] and platform.libc_ver()[0] == "glibc":
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
        if mallopt is not None:
            _kept[0] = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                                         TRIM_THRESHOLD))
    return _kept[0]
