"""Building and loading the fused CPU kernel: lazy, lock-proof, and a clean fallback.

Each test runs Python in a subprocess with its own empty extension cache
(TORCH_EXTENSIONS_DIR), so module-level state (the loaded library, the one-time warning)
starts fresh and the developer's own cache is never touched.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs one tiny recurrence with the given backend and checks it against the reference.
CHECK = """
import sys, time, warnings
import torch
warnings.simplefilter("always")
start = time.time()
from sru.ops import available_backends, elementwise_recurrence, elementwise_recurrence_reference
from sru.ops.cpu.build import library_path
cached = library_path().exists()
g = torch.Generator().manual_seed(0)
U, x = torch.randn(4, 2, 24, generator=g), torch.randn(4, 2, 8, generator=g)
wc, b = torch.randn(16, generator=g), torch.randn(16, generator=g)
with warnings.catch_warnings(record=True) as caught:
    for _ in range(2):
        h, c = elementwise_recurrence(U, x, wc, b, None, 8)
    backends = available_backends()
h_ref, c_ref = elementwise_recurrence_reference(U, x, wc, b, None, 8)
assert torch.allclose(h, h_ref, atol=1e-5) and torch.allclose(c, c_ref, atol=1e-5)
ours = [str(w.message) for w in caught if "sru" in str(w.message)]
print("backends", backends)
print("cached_before", cached)
print("sru_warnings", len(ours))
for message in ours:
    print("warning:", message.splitlines()[0])
try:
    elementwise_recurrence(U, x, wc, b, None, 8, backend="cpu")
    print("explicit_cpu ok")
except RuntimeError as exc:
    print("explicit_cpu error:", str(exc).splitlines()[0])
print("seconds", round(time.time() - start, 1))
"""


def python(code, cache, **env):
    """Start ``python -c code`` with ``cache`` as the extension cache and extra env vars."""
    full_env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(cache), PYTHONPATH=str(ROOT), **env)
    for name in ("SRU_CPU_EXTENSION", "SRU_CPU_NATIVE"):
        if name not in env:
            full_env.pop(name, None)
    return subprocess.Popen([sys.executable, "-c", code], env=full_env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc, timeout=300):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"timed out after {timeout}s (a build lock wait?):\n{proc.communicate()[0]}")
    assert proc.returncode == 0, out
    return out


@pytest.mark.slow
def test_import_builds_nothing(tmp_path):
    out = finish(python("import sru, sru.ops; print('imported')", tmp_path), 120)
    assert "imported" in out
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.mark.slow
def test_disabled_by_environment(tmp_path):
    out = finish(python(CHECK, tmp_path, SRU_CPU_EXTENSION="0"), 120)
    assert "backends ['reference']" in out
    assert "sru_warnings 0" in out  # asked for: no warning
    assert "explicit_cpu error: sru: the fused CPU kernel is unavailable" in out


@pytest.mark.slow
def test_build_failure_warns_once_and_falls_back(tmp_path):
    out = finish(python(CHECK, tmp_path, CXX=str(tmp_path / "no-such-compiler")), 120)
    assert "backends ['reference']" in out, out
    assert "sru_warnings 1" in out, out  # two calls and available_backends(): one warning
    assert "could not build the fused CPU recurrence kernel" in out
    assert "explicit_cpu error" in out  # backend='cpu' is a request, not a preference
    assert not list(tmp_path.glob("*/*.build-*")), "the failed build's scratch dir was left behind"


@pytest.mark.slow
def test_stale_lock_and_concurrent_builds(tmp_path):
    """A lock left by a killed build must not block; two processes may build at once."""
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path))
    code = "from sru.ops.cpu.build import extension_name; print(extension_name())"
    name = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, check=True).stdout.strip()
    entry = tmp_path / name
    (entry / (name + ".build-killed")).mkdir(parents=True)
    (entry / "lock").write_text("")  # where cpp_extension's own lock would be
    (entry / (name + ".build-killed") / "lock").write_text("")
    abandoned = entry / (name + ".build-yesterday")  # an old one is cleaned up
    abandoned.mkdir()
    os.utime(abandoned, (time.time() - 86400, time.time() - 86400))

    start = time.time()
    procs = [python(CHECK, tmp_path) for _ in range(2)]
    outs = [finish(p) for p in procs]
    for out in outs:
        assert "'cpu'" in out and "sru_warnings 0" in out and "explicit_cpu ok" in out, out
    assert (entry / (name + ".so")).exists()
    # The recent scratch dir may belong to a live build elsewhere: left alone.
    assert [p.name for p in entry.glob("*.build-*")] == [name + ".build-killed"]

    # Once published, the library loads from the cache without a build.
    out = finish(python(CHECK, tmp_path), 120)
    assert "cached_before True" in out and "'cpu'" in out, out
    print(f"two concurrent builds took {time.time() - start:.0f}s")


@pytest.mark.slow
def test_a_cached_library_without_the_symbols_is_built_again(tmp_path):
    """A cached file that opens but lacks the expected functions (an incompatible build) is rebuilt, not given
    up on: here the decoding kernels' place holds libm."""
    code = """
import ctypes.util, shutil, warnings
from pathlib import Path
warnings.simplefilter("error")  # the give-up path warns
from sru.ops.cpu.build import library_path
from sru.ops.cpu import decoding
target = library_path("sru_decoding", decoding.SOURCES)
target.parent.mkdir(parents=True)
libm = ctypes.CDLL(ctypes.util.find_library("m"))._name
shutil.copy(next(p for p in map(Path, ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"])
                 if (p / libm).exists()) / libm, target)
lib = decoding.library()
print("rebuilt", lib is not None and hasattr(lib, "sru_beam_rows"))
"""
    out = finish(python(code, tmp_path), 300)
    assert "rebuilt True" in out, out
