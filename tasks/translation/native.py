"""The translation task's C kernels (beam_rows.cpp, decode_attention.cpp), built into one library on first use
through the SRU kernel's build (``sru.ops.backends.load_or_build``: cached per source, flags, torch and CPU; published
atomically; ``SRU_CPU_EXTENSION=0`` turns it off). Where it cannot be built, one warning, and the callers use
torch ops (``library()`` is None)."""
from __future__ import annotations

import ctypes
import os
import threading
import warnings
from pathlib import Path
from typing import Optional

from sru.ops.backends import load_or_build, short_log

SOURCES = tuple(Path(__file__).with_name(name) for name in ("beam_rows.cpp", "decode_attention.cpp"))
_lock = threading.Lock()
_loaded: dict = {}  # "library": the CDLL, or None once it failed (tried once per process)


def _open(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    pointer, integer, flag = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.translation_beam_rows.argtypes = [pointer, integer, integer, integer, pointer, integer, pointer, pointer,
                                          flag]
    lib.translation_beam_rows.restype = None
    lib.translation_decode_attention.argtypes = [pointer] * 5 + [integer] * 5 + [pointer] * 4 + [ctypes.c_float, flag]
    lib.translation_decode_attention.restype = flag
    lib.translation_decode_attention_available.restype = flag
    return lib


def _build_or_open() -> Optional[ctypes.CDLL]:
    if os.environ.get("SRU_CPU_EXTENSION", "1") == "0":
        return None
    try:
        return load_or_build("translation_kernels", SOURCES, _open)
    except Exception as exc:  # any build failure: the callers' torch ops give the same results
        warnings.warn(f"translation: could not build {', '.join(s.name for s in SOURCES)}, so beam search and "
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
