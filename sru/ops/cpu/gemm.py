"""One CPU GEMM dispatch for the SRU's projections: MKL (``torch.mm``) or oneDNN
(``torch.ops.mkldnn._linear_pointwise`` with the weight prepacked), chosen per product.

Why: torch's fp32 ``mm`` is MKL's sgemm, which on some CPUs (AMD EPYC with AVX-512)
runs at less than half the speed of oneDNN's GEMM on the same cores, while on Intel parts the
two are within a few percent. Which one is faster depends on the CPU, the shape and the thread
count, so ``auto`` measures it once per (product, row bucket, widths, threads), like
``cudnn.benchmark``, and caches the answer for the process (``cpu_gemm_report()`` lists them; a
debug log line on ``sru.ops.cpu.gemm`` names each choice). MKL wins ties (within 5 %): it is
what every path used before, so a machine where oneDNN is not clearly faster runs exactly as
before.

Products (``kind``), with the SRU's weight W (in, out): ``fwd`` U = X W, ``dx`` dX = dU Wᵀ,
``dw`` dW = Xᵀ dU. Only float32 on plain eager CPU tensors is dispatched; every other case
(float64, compile, export, functorch, CUDA) is ``torch.mm`` as before. fp32 stays fp32: oneDNN
computes in fp32 (only the summation order differs). Two more routes serve low precision: bf16 under
autocast in inference (``bf16_matmul``) and an ``int8`` weight (``sru.ops.quantized.Int8Weight``) for
``sru.quantize_dynamic``'s models.

Forcing: ``SRU(..., gemm="mkl"|"onednn")`` per module, or the environment variable
``SRU_CPU_GEMM=mkl|onednn|auto`` for modules left at ``gemm="auto"`` (read when sru is imported;
``clear_cpu_gemm_cache()`` reads it again).

Prepacked weights: oneDNN reads W in its own blocked layout; the packed copy is cached per
weight tensor and rebuilt when the weight's version counter or storage changes (an optimizer's
in-place step bumps the version; writes through ``param.data`` do not, so after such a write call
``clear_cpu_gemm_cache()``).
"""
import functools
import logging
import os
import statistics
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from ..precision import under_autocast
from ..tracing import eager_cpu
from .int8 import clear_packs

LIBRARIES = ("auto", "mkl", "onednn")
ENV_VAR = "SRU_CPU_GEMM"
SMALL_WORK = 1 << 22  # multiply-adds below which auto keeps MKL unmeasured (noise > difference; stable)
# Which row bucket a product's choice is measured at: its own, unless that product is larger than
# MEASURED_WORK_CAP multiply-adds, then the largest bucket under the cap, never below MEASURED_ROWS_CAP rows.
# Why: measuring costs ~18 products per shape and bucket, which for the 4,000-word output layer at 2,048 rows
# took 0.7 s (a short translation predict.py spent 3.0 s of 7.4 s measuring), and for such wide products the
# two libraries' ratio at 256 rows was within 6 % of that at 2,048; for narrow ones it was not: at 1,024 x 256 x
# 768 (the grid's L=32 B=32 d=256) MKL won at 256 rows and oneDNN was 7 % faster at 1,024, so those, cheap to
# measure (a 2^28 product is ~2 ms on one core), are measured where they run (docs/ops.md#cpu-gemm-dispatch-sruopscpugemmpy).
MEASURED_ROWS_CAP = 256
MEASURED_WORK_CAP = 1 << 28
TIE_MARGIN = 1.05  # oneDNN must beat MKL by more than this (paired median) to be chosen by ``auto``
_log = logging.getLogger(__name__)
_choices: Dict[tuple, dict] = {}  # (kind, row bucket, d_in, d_out, threads) -> measurement
_routes: Dict[tuple, bool] = {}  # matmul's memo of uses_onednn per (library, env, bucket, shape, ...)
_packs = WeakIdKeyDictionary()   # weight -> {(kind, bucket): (version, data_ptr, packed)}
_lock = threading.Lock()
_warned: set = set()


def check_library(value, owner: str = "gemm") -> str:
    if value not in LIBRARIES:
        raise ValueError(f"{owner} expected gemm in {LIBRARIES}, got {value!r}")
    return value


@functools.lru_cache(maxsize=None)
def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def row_bucket(rows: int) -> int:
    """The power of two at or above ``rows`` (capped at 4096): shapes in one bucket share a choice."""
    return 4096 if rows >= 4096 else 1 << max(rows - 1, 0).bit_length()


def dispatchable(a: Tensor, b: Tensor) -> bool:
    """Float32 tensors on the one eager-CPU guard (``sru.ops.tracing.eager_cpu``), outside autocast: a
    product (of the fused training path's backward) the dispatch may send to oneDNN."""
    return (a.dtype is torch.float32 and b.dtype is torch.float32 and not under_autocast("cpu")
            and eager_cpu(a, b))


# SRU_CPU_GEMM as read when sru was imported or at the last clear_cpu_gemm_cache() (reading
# os.environ costs more than the check itself, and this is consulted before every projection and decoding step)
_env = [os.environ.get(ENV_VAR)]
_env_parsed = ["auto", "auto"]  # [raw value, its meaning]: parsed again only when it changes


def env_override() -> Optional[str]:
    return _env[0]


def requested(library: str) -> str:
    """The module's choice, with ``auto`` overridden by the environment variable if set."""
    if library != "auto":
        return library
    raw = _env[0] or "auto"
    if raw == _env_parsed[0]:
        return _env_parsed[1]
    env = raw.strip().lower() or "auto"
    if env not in LIBRARIES:
        _log.warning("%s=%r is not one of %s; using auto", ENV_VAR, raw, LIBRARIES)
        env = "auto"
    _env_parsed[:] = [raw, env]
    return env


# --- the two routes --------------------------------------------------------------------------
# ``oi``: the weight is stored (out, in) (``nn.Linear``), else (in, out) (the SRU's ``weight``).
# a/b per kind: fwd (X, W) -> Y = X W_io; dx (dY, W) -> dX = dY W_ioᵀ; dw (X, dY) -> the weight's
# gradient in the weight's own layout.

def _version(t: Tensor) -> int:
    """The version counter; inference tensors (made under ``torch.inference_mode``) have none, and
    their storage and shape key the pack alone."""
    return -1 if t.is_inference() else t._version


def _packed(weight: Tensor, plain_of: Callable[[Tensor], Tensor], tag: tuple, bucket: int) -> Tensor:
    """``plain_of(weight)`` in oneDNN's blocked layout, cached per weight tensor and rebuilt when
    the weight's version counter, storage or shape changed."""
    with torch.no_grad():
        slots = _packs.get(weight)
        if slots is None:
            slots = _packs[weight] = {}
        key = (tag, bucket)
        stamp = (_version(weight), weight.data_ptr(), tuple(weight.shape))
        entry = slots.get(key)
        if entry is None or entry[0] != stamp:
            plain = plain_of(weight.detach()).contiguous()
            entry = slots[key] = (stamp, torch.ops.mkldnn._reorder_linear_weight(plain, bucket))
        return entry[1]


_transpose, _same = Tensor.t, (lambda t: t)  # noqa: E731  (how a pack reads the weight)


def _onednn(kind: str, a: Tensor, b: Tensor, oi: bool) -> Tensor:
    linear = torch.ops.mkldnn._linear_pointwise
    if kind == "fwd":  # oneDNN wants W (out, in)
        packed = _packed(b, _same if oi else _transpose, ("fwd", oi), row_bucket(a.shape[0]))
        return linear(a, packed, None, "none", [], "")
    if kind == "dx":  # dY W_oi = linear(dY, W_io)
        packed = _packed(b, _transpose if oi else _same, ("dx", oi), row_bucket(a.shape[0]))
        return linear(a, packed, None, "none", [], "")
    if oi:  # dW_oi = dYᵀ X
        return linear(b.t(), a.t(), None, "none", [], "")
    return linear(a.t(), b.t(), None, "none", [], "")  # dW_io = Xᵀ dY


def _mkl(kind: str, a: Tensor, b: Tensor, oi: bool) -> Tensor:
    if kind == "fwd":
        return a.mm(b.t() if oi else b)
    if kind == "dx":
        return a.mm(b if oi else b.t())
    return b.t().mm(a) if oi else a.t().mm(b)


# --- the choice ------------------------------------------------------------------------------

def _operands(kind: str, rows: int, d_in: int, d_out: int, oi: bool) -> Tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    x, dy = torch.randn(rows, d_in, generator=g), torch.randn(rows, d_out, generator=g)
    w = torch.randn(*((d_out, d_in) if oi else (d_in, d_out)), generator=g)
    return {"fwd": (x, w), "dx": (dy, w), "dw": (x, dy)}[kind]


def _clock() -> Callable[[], float]:
    """This thread's CPU time when the products run on one thread, else wall time. Why: on a shared
    machine time spent descheduled lands on both libraries alike and pulls their ratio towards 1; on a
    loaded Zen 4 (1 thread) wall time gave MKL / oneDNN 1.02-1.03 at 256 rows where CPU time gave
    1.06-1.13 (and 1.19-1.25 at 2,048 rows, the grid's bound), so MKL stayed chosen at 1.15-1.2x oneDNN's time."""
    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


def _time(fn: Callable[[], object], calls: int) -> float:
    clock = _clock()
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


def measure(kind: str, rows: int, d_in: int, d_out: int, oi: bool = False, rounds: int = 7) -> dict:
    """Both routes on synthetic operands of this shape in interleaved rounds (order alternating):
    medians in ms and the median over rounds of the per-round ratio mkl / onednn (paired, so load
    from other processes that drifts during the measurement cancels)."""
    a, b = _operands(kind, rows, d_in, d_out, oi)
    routes = {"mkl": lambda: _mkl(kind, a, b, oi), "onednn": lambda: _onednn(kind, a, b, oi)}
    for fn in routes.values():  # warm up (and pack the weight once)
        fn()
        fn()
    one = max(_time(routes["mkl"], 1), 1e-6)
    calls = max(1, min(50, int(2e-3 / one)))  # ~2 ms a sample
    samples = {name: [] for name in routes}
    for r in range(rounds):
        for name in (list(routes) if r % 2 == 0 else list(routes)[::-1]):
            samples[name].append(_time(routes[name], calls))
    ratio = statistics.median(m / o for m, o in zip(samples["mkl"], samples["onednn"]))
    return {"mkl_ms": statistics.median(samples["mkl"]) * 1e3,
            "onednn_ms": statistics.median(samples["onednn"]) * 1e3, "mkl_over_onednn": ratio}


def measured_bucket(rows: int, d_in: int, d_out: int) -> int:
    """The row bucket whose measurement decides a product of ``rows`` rows: ``row_bucket(rows)``, halved while
    it is above ``MEASURED_ROWS_CAP`` and the product there exceeds ``MEASURED_WORK_CAP`` multiply-adds."""
    bucket = row_bucket(rows)
    while bucket > MEASURED_ROWS_CAP and bucket * d_in * d_out > MEASURED_WORK_CAP:
        bucket //= 2
    return bucket


def choose(kind: str, rows: int, d_in: int, d_out: int, library: str = "auto", oi: bool = False) -> str:
    """"mkl" or "onednn" for this product (``library`` forced, else the cached measurement)."""
    library = requested(library)
    if library == "onednn" and not onednn_available():
        if "onednn-missing" not in _warned:
            _warned.add("onednn-missing")
            _log.warning("gemm='onednn' asked but this torch has no oneDNN; using MKL (torch.mm)")
        return "mkl"
    if library != "auto":
        return library
    if rows * d_in * d_out < SMALL_WORK:  # tiny products: the same library in every process
        return "mkl"
    key = (kind, measured_bucket(rows, d_in, d_out), d_in, d_out, oi, torch.get_num_threads())
    found = _choices.get(key)
    if found is None:
        with _lock:
            found = _choices.get(key)
            if found is None:
                found = _decide(key)
    return found["choice"]


def _decide(key: tuple) -> dict:
    kind, bucket, d_in, d_out, oi, threads = key
    if not onednn_available():
        found = {"mkl_ms": None, "onednn_ms": None, "choice": "mkl"}
    else:
        with torch.no_grad():
            found = measure(kind, bucket, d_in, d_out, oi)
        ratio = found.get("mkl_over_onednn", found["mkl_ms"] / found["onednn_ms"])
        found["choice"] = "onednn" if ratio > TIE_MARGIN else "mkl"
    _choices[key] = found
    _log.debug("sru cpu gemm: %s rows<=%d %dx%d fp32 %d threads: mkl %s ms, onednn %s ms -> %s",
               kind, bucket, d_in, d_out, threads, _fmt(found["mkl_ms"]), _fmt(found["onednn_ms"]),
               found["choice"])
    return found


def _fmt(ms: Optional[float]) -> str:
    return "-" if ms is None else f"{ms:.3f}"


def _widths(weight: Tensor, oi: bool) -> Tuple[int, int]:
    """(in, out) features of the weight."""
    return (weight.shape[1], weight.shape[0]) if oi else (weight.shape[0], weight.shape[1])


def product(kind: str, a: Tensor, b: Tensor, weight: Tensor, library: str = "auto",
            oi: bool = False) -> Tensor:
    """One product (no autograd of its own) through the chosen library; ``weight`` gives the
    widths. Non-dispatchable tensors take ``torch.mm`` as before."""
    if dispatchable(a, b) and choose(kind, a.shape[0], *_widths(weight, oi), library, oi) == "onednn":
        return _onednn(kind, a, b, oi)
    return _mkl(kind, a, b, oi)


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, library: str, oi: bool) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.library, ctx.oi = library, oi
        return product("fwd", x, weight, weight, library, oi)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        lib, oi = ctx.library, ctx.oi
        grad_x = product("dx", grad, weight, weight, lib, oi) if ctx.needs_input_grad[0] else None
        grad_w = product("dw", x, grad, weight, lib, oi) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w, None, None


def uses_onednn(rows: int, weight: Tensor, library: str, backward: bool, oi: bool = False) -> bool:
    kinds = ("fwd", "dx", "dw") if backward else ("fwd",)
    widths = _widths(weight, oi)
    return any(choose(kind, rows, *widths, library, oi) == "onednn" for kind in kinds)


def routes_to_onednn(x: Tensor, weight: Tensor, library: str, oi: bool) -> bool:
    """Whether any of this product's fwd (and, with autograd, dx / dw) products goes to oneDNN: one dict lookup
    per call once the shape was seen (this runs per projection). Float32 eager CPU tensors (the caller checks)."""
    backward = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    rows = x.shape[0]
    key = (library, _env[0], 4096 if rows >= 4096 else 1 << max(rows - 1, 0).bit_length(),
           weight.shape, oi, backward, torch.get_num_threads())
    onednn = _routes.get(key)
    if onednn is None:
        onednn = _routes[key] = uses_onednn(rows, weight, library, backward, oi)
    return onednn


def onednn_matmul(x: Tensor, weight: Tensor, library: str, oi: bool) -> Tensor:
    """x W through oneDNN (differentiable: each backward product through its chosen library)."""
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _Matmul.apply(x.contiguous(), weight, library, oi)
    return _onednn("fwd", x.contiguous(), weight, oi)


# --- bf16 inference: the weight's bf16 copy prepacked ------------------------------------------------------------

@functools.lru_cache(maxsize=None)  # asked once per process
def onednn_packs_bf16() -> bool:
    """Whether oneDNN here can prepack a bf16 weight: it needs AVX512-BW/VL/DQ or AVX-NE-CONVERT, which an
    AVX2-only CPU lacks ("mkldnn_reorder_linear_weight: bf16 path needs ..."); there bf16 autocast takes
    torch's own path (emulated, slower than fp32: docs/ops.md). Asked of oneDNN itself, once, so that
    ``ONEDNN_MAX_CPU_ISA=AVX2`` (how docs/benchmarks.md measures an AVX2-only CPU) is honoured too."""
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(16, 16, dtype=torch.bfloat16), 16)
        return True
    except RuntimeError:
        return False


def bf16_matmul(x: Tensor, weight: Tensor, oi: bool = False) -> Tensor:
    """U in bf16 (fp32 accumulation inside oneDNN), returned as float32 for the fp32 recurrence."""
    packed = _packed(weight, lambda w: (w if oi else w.t()).to(torch.bfloat16), ("bf16", oi),
                     row_bucket(x.shape[0]))
    out = torch.ops.mkldnn._linear_pointwise(x.contiguous().to(torch.bfloat16), packed, None, "none", [], "")
    return out.float()


def cpu_gemm_report() -> List[dict]:
    """Every choice ``auto`` made in this process: product, row bucket (``rows_up_to``; a bucket capped by
    ``measured_bucket`` also serves every larger product of those widths), widths, weight layout, threads,
    both libraries' median ms and the choice."""
    return [{"kind": k[0], "rows_up_to": k[1], "d_in": k[2], "d_out": k[3],
             "weight_layout": "out,in" if k[4] else "in,out", "threads": k[5], **v}
            for k, v in sorted(_choices.items())]


def clear_cpu_gemm_cache() -> None:
    """Forget every choice and packed weight (after writing weights through ``.data``) and read
    ``SRU_CPU_GEMM`` again (after changing it in this process)."""
    with _lock:
        _env[0] = os.environ.get(ENV_VAR)
        _choices.clear()
        _routes.clear()
        _packs.clear()
        clear_packs()
