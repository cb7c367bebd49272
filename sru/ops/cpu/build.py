"""Build the fused CPU kernel on first use, cache it, and fall back cleanly when that fails.

The kernel (``sru_recurrence.cpp``, plus ``sru_stack.cpp``: a whole inference stack in one call;
both include ``sru_args.h``; ``sru_int8.cpp``: the per-token passes around an int8 product; and
``srupp_step.cpp``: SRU++'s decoding step, sharing sru_stack.cpp's products through ``sru_gemm.h``) is
compiled with ``torch.utils.cpp_extension.load`` the first time a CPU recurrence runs (never at import),
into a cache directory (decoding.py's kernels, ``beam_rows.cpp`` and ``decode_attention.cpp``, are a second
library built the same way, ``load_or_build``):
``$TORCH_EXTENSIONS_DIR`` if set, else ``~/.cache/torch_extensions`` (``$XDG_CACHE_HOME``
respected). The cache entry's name hashes the source, the compiler flags, torch's version and
the CPU (the build uses ``-march=native``), so a changed source or a different machine never
picks up a stale binary.

Locks: ``cpp_extension`` serialises builds with a lock file and waits forever on one left
behind by a killed build (the official ``sru`` package hangs exactly there). We never share a
build directory: every process compiles in its own fresh temporary directory and publishes the
library with an atomic ``os.replace``. A leftover lock or half-built directory is simply
ignored; two processes building at once both succeed, and the last rename wins.

Failure (no compiler, no OpenMP, no ninja, a compile error): one ``RuntimeWarning`` that says
what failed and how to fix it, then callers use the PyTorch reference.
Environment: ``SRU_CPU_EXTENSION=0`` disables the kernel; ``SRU_CPU_NATIVE=0`` builds without
``-march=native`` (e.g. a cache directory shared by different machines).
"""
import ctypes
import hashlib
import os
import platform
import shutil
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

SOURCE = Path(__file__).with_name("sru_recurrence.cpp")
SOURCES = (SOURCE, SOURCE.with_name("sru_stack.cpp"), SOURCE.with_name("sru_int8.cpp"),
           SOURCE.with_name("srupp_step.cpp"))
HEADERS = tuple(SOURCE.with_name(name) for name in ("sru_args.h", "sru_avx2.h", "sru_bf16.h", "sru_gemm.h",
                                                     "sru_math.h", "sru_work.h"))
_lock = threading.Lock()
_library: Optional[ctypes.CDLL] = None
_error: Optional[str] = None


def cache_root() -> Path:
    """The directory that holds built extensions (shared with torch's own JIT builds)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root:
        return Path(root)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "torch_extensions"


def compile_flags() -> list:
    # -fno-trapping-math lets the selects in the kernel's fast_exp vectorise.
    flags = ["-O3", "-fopenmp", "-fno-math-errno", "-fno-trapping-math"]
    if os.environ.get("SRU_CPU_NATIVE", "1") != "0":
        flags.append("-march=native")
    return flags


def _cpu_signature() -> str:
    """What -march=native depends on: the CPU model and its instruction-set flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine() + platform.processor()
    wanted = ("model name", "flags", "Features", "CPU part")  # x86 and ARM spellings
    seen = {}
    for line in lines:
        key = line.split(":", 1)[0].strip()
        if key in wanted and key not in seen:
            seen[key] = line
    return platform.machine() + "\n" + "\n".join(seen[k] for k in sorted(seen))


def extension_name(prefix: str = "sru_cpu", sources: tuple = SOURCES) -> str:
    """``<prefix>_<hash>``: changes whenever the binary would differ."""
    key = hashlib.sha256()
    parts = (*(f.read_bytes() for f in sources + HEADERS), " ".join(compile_flags()).encode(),
             torch.__version__.encode(),
             os.environ.get("CXX", "c++").encode(), _cpu_signature().encode())
    for part in parts:
        key.update(part)
        key.update(b"\0")
    return prefix + "_" + key.hexdigest()[:16]


def library_path(prefix: str = "sru_cpu", sources: tuple = SOURCES) -> Path:
    """Where the library built from ``sources`` is (or will be) cached."""
    name = extension_name(prefix, sources)
    return cache_root() / name / (name + ".so")


def _remove_abandoned_builds(entry: Path, name: str, age_s: float = 3600.0) -> None:
    """Delete scratch directories of builds that were killed (older than any live build)."""
    now = time.time()
    for scratch in entry.glob(name + ".build-*"):
        try:
            if now - scratch.stat().st_mtime > age_s:
                shutil.rmtree(scratch, ignore_errors=True)
        except OSError:
            pass  # another process removed it first


def build_extension(target: Path, sources: tuple = SOURCES) -> None:
    """Compile into a private temporary directory, then atomically publish to ``target``."""
    from torch.utils import cpp_extension  # imported lazily: it is slow to import

    name = target.stem
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_builds(target.parent, name)
    scratch = tempfile.mkdtemp(prefix=name + ".build-", dir=target.parent)
    try:
        cpp_extension.load(name=name, sources=[str(f) for f in sources], extra_cflags=compile_flags(),
                           extra_ldflags=["-fopenmp", "-ldl"], build_directory=scratch,
                           is_python_module=False, verbose=False)
        os.replace(os.path.join(scratch, name + ".so"), target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _open(path: Path) -> ctypes.CDLL:
    from .kernel import configure_library

    return configure_library(ctypes.CDLL(str(path)))


def load_or_build(prefix: str, sources: tuple, open_library: Callable[[Path], ctypes.CDLL]) -> ctypes.CDLL:
    """``open_library`` of the cached build of ``sources``, building it first where it is missing or cannot be
    opened (half-written by a killed process, or from an incompatible build: a symbol missing, AttributeError, or
    a layout the caller rejects, RuntimeError). Build errors propagate."""
    target = library_path(prefix, sources)
    mapped = False  # whether this process holds an incompatible build of target
    if target.exists():
        try:
            return open_library(target)
        except OSError:
            pass  # unreadable (half-written): nothing of it was loaded
        except (AttributeError, RuntimeError):
            mapped = True
    build_extension(target, sources)
    if not mapped:
        return open_library(target)
    # the loader would hand back the old build it keeps mapped under this path: open the new one by another name
    alias = target.with_name(f"{target.stem}.rebuilt-{os.getpid()}.so")
    os.symlink(target.name, alias)
    try:
        return open_library(alias)
    finally:
        alias.unlink()


def short_log(message: str, tail: int = 3, width: int = 240) -> str:
    """First line and last lines of a (long) build log: what failed, and why."""
    lines = [line.strip()[:width] for line in str(message).splitlines() if line.strip()]
    keep = lines if len(lines) <= tail + 1 else [lines[0], "..."] + lines[-tail:]
    return "\n    ".join(keep)


def load_library() -> Optional[ctypes.CDLL]:
    """The compiled kernel library, building it if needed; None (after one warning) if it fails."""
    global _library, _error
    if _library is not None or _error is not None:
        return _library
    with _lock:
        if _library is not None or _error is not None:
            return _library
        if os.environ.get("SRU_CPU_EXTENSION", "1") == "0":
            _error = "disabled by SRU_CPU_EXTENSION=0"
            return None
        try:
            _library = load_or_build("sru_cpu", SOURCES, _open)
        except Exception as exc:  # any build failure means: use the reference instead
            _error = f"{type(exc).__name__}: {short_log(exc)}"
            warnings.warn(
                "sru: could not build the fused CPU recurrence kernel, so the slower PyTorch "
                f"reference is used instead.\n  What failed: {_error}\n  Fix: install a C++ "
                "compiler with OpenMP (e.g. `apt install g++`, or set CXX) and `pip install "
                "ninja`; if the CPU flags are the problem set SRU_CPU_NATIVE=0; set "
                f"SRU_CPU_EXTENSION=0 to silence this. Cache directory: {cache_root()}",
                RuntimeWarning, stacklevel=3)
    return _library


def load_error() -> Optional[str]:
    """Why the kernel is unavailable (None if it loaded or was never tried)."""
    return _error


def cpu_kernel_available() -> bool:
    # Builds on first call; torch.compile evaluates it once at trace time, not in the graph.
    return load_library() is not None


# What torch.compiler.assume_constant_result does, without importing torch._dynamo at
# `import sru` time (that import alone costs seconds).
cpu_kernel_available._dynamo_marked_constant = True
