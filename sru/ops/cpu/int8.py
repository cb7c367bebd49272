"""int8 products for ``sru.quantize_dynamic``: int8 weights with one scale per output
channel, activations quantised per token (one scale per row) at run time, through torch's maintained
int8 kernels. docs/ops.md#int8-and-bf16-inference-sruquantizepy says why these kernels.

Two routes, by ``int8_engine()``:
- ``qlinear`` (wherever torch has oneDNN's int8 linear: AMX, VNNI or AVX2 code): each row is quantised by its
  own max |x| into uint8 in one fused C pass (``sru_int8.cpp``; 7 bits without VNNI, ``activation_levels``),
  oneDNN's u8 x s8 GEMM (``torch.ops.onednn.qlinear_pointwise``, the kernel of torch's x86 int8 inference)
  computes the product with one input scale for all rows, and a second C pass multiplies each output row by
  its max and adds the bias. Without the compiled library both passes run as torch ops (slower, same
  rounding up to ties).
- ``linear_dynamic`` (a torch without oneDNN's int8 linear, or an engine forced by ``SRU_INT8_ENGINE``):
  torch's dynamic quantised linear (fbgemm / x86 / oneDNN), which takes one scale per call. Per token through it: the product is linear in each
  row, so ``x_i W = s_i (x_i / s_i) W`` with ``s_i = max |x_i|``; every row of ``x / s`` lies in [-1, 1],
  and one extra row holding +1 and -1 pins the kernel's range to exactly [-1, 1].
Either way a row's result does not depend on its neighbours (beam search's batch shrinks as sentences
finish), and one large row does not coarsen the others' steps, which a per-call scale did.

Small and narrow products run in float32 with the dequantised int8 weight (``takes_int8``): there quantising
costs more than the int8 product saves (``INT8_MIN_WORK``, measured by bench/precision/int8_rows.py).
"""
import ctypes
import functools
import os
import threading
import warnings
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from ..tracing import eager_cpu
from .build import load_library

QLINEAR = "qlinear"  # oneDNN's u8 x s8 GEMM behind our per-row quantiser (module docstring)
INT8_ENGINES = (QLINEAR, "x86", "fbgemm", "onednn")  # qlinear, then torch's quantised engines for x86 CPUs
INT8_ENGINE_VAR = "SRU_INT8_ENGINE"
ONEDNN_MIN_ROWS = 16  # oneDNN int8 calls have at least this many rows (AMX's tile height; _qlinear_product)
# Where the int8 kernel beats float32 (python -m bench.precision.int8_rows, docs/ops.md): by the weight's width
# in * out / (in + out) (per row, the multiply-adds must outweigh int8's passes over the row's input and
# output), the least multiply-adds per call: wide weights (512 x 1,536, 256 x 4,000) from 2^20 (2 rows),
# narrower ones (256 x 768 from about 43 rows, 256 x 256 from 128) from 2^23.
INT8_MIN_WORK = {200: 1 << 20, 100: 1 << 23}  # width floor -> least multiply-adds; narrower: float32
_packs = WeakIdKeyDictionary()   # int8 weight -> {"stamp": version stamp, engine: packed params}
_dequantized = WeakIdKeyDictionary()  # int8 weight -> (stamp, float32 weight (out, in))
_local = threading.local()  # per thread and dtype: the scratch buffer of per_token_product
_pins: Dict[Tuple[int, int], Tensor] = {}  # (rows, width) -> the rows appended to a normalised input


@functools.lru_cache(maxsize=None)  # asked before every int8 product
def qlinear_available() -> bool:
    """Whether this torch has oneDNN's static int8 linear (``torch.ops.onednn.qlinear_pointwise``)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.onednn, "qlinear_pointwise")


def usable_engines() -> list:
    """The ``INT8_ENGINES`` this torch can run, in that order."""
    supported = torch.backends.quantized.supported_engines
    return [e for e in INT8_ENGINES if (qlinear_available() if e == QLINEAR else e in supported)]


def int8_engine() -> Optional[str]:
    """What runs an int8 product: ``SRU_INT8_ENGINE`` when set; else ``qlinear`` where this torch has it (the fastest
    route for the SRU layer on every CPU measured, with and without VNNI/AMX: docs/speed/low_precision.md); else torch's current engine when it is an x86 one; else the first there is. torch's
    global engine is left as it was."""
    wanted = os.environ.get(INT8_ENGINE_VAR)
    if wanted:
        if wanted not in usable_engines():
            raise ValueError(f"{INT8_ENGINE_VAR}={wanted}: the int8 engines this torch has for x86 CPUs are "
                             f"{usable_engines()}; unset it to choose automatically")
        return wanted
    if qlinear_available():  # asked before every int8 product: no engine list on this path
        return QLINEAR
    usable, current = usable_engines(), torch.backends.quantized.engine
    return current if current in usable else next(iter(usable), None)


def onednn_int8_rows(rows: int) -> int:
    """``rows`` rounded up to one of 8 sizes per power of two (at most 1/8 more rows): oneDNN builds (JITs) a
    kernel per row count, about 2.7 ms each for 600 x 256 x 256 here, 10x the product itself, so beam search,
    whose batch shrinks as sentences finish, would build one nearly every step; padded, a few sizes recur."""
    step = 1 << max(rows.bit_length() - 4, 0)
    return -(-rows // step) * step


def _stamp(q: Tensor, scale: Tensor) -> tuple:
    """Changes when the int8 weight or its scales are written in place (inference tensors have no version)."""
    version = lambda t: -1 if t.is_inference() else t._version  # noqa: E731
    return version(q), version(scale), q.data_ptr()


def packed_weight(q: Tensor, scale: Tensor, engine: str):
    """The int8 weight prepacked for ``engine`` (qlinear: with its scales and zero points), cached per weight
    and rebuilt when it changes."""
    stamp = _stamp(q, scale)
    packs = _packs.get(q)
    if packs is None or packs["stamp"] != stamp:
        packs = _packs[q] = {"stamp": stamp}
    if engine == QLINEAR and engine not in packs:  # oneDNN's blocked int8 weight, its scales and zero points
        packs[engine] = (torch.ops.onednn.qlinear_prepack(q.contiguous(), None), scale.float().contiguous(),
                         torch.zeros(q.shape[0], dtype=torch.long))
    if engine not in packs:
        with warnings.catch_warnings():  # quantised tensors are deprecated, their kernels are not
            warnings.simplefilter("ignore")
            qw = torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0)
        before = torch.backends.quantized.engine
        torch.backends.quantized.engine = engine  # the packed weight keeps its engine; calls follow it
        try:
            packs[engine] = torch.ops.quantized.linear_prepack(qw, None)
        finally:
            torch.backends.quantized.engine = before
    return packs[engine]


def dequantized_weight(q: Tensor, scale: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """``q * scale`` (out, in); in float32 without autograd cached per weight (small products use it)."""
    if dtype is not torch.float32 or torch.is_grad_enabled():  # a cached inference tensor cannot enter autograd
        return q.to(dtype) * scale.to(dtype)[:, None]
    stamp = _stamp(q, scale)
    found = _dequantized.get(q)
    if found is None or found[0] != stamp:
        found = _dequantized[q] = (stamp, q.float() * scale.float()[:, None])
    return found[1]


def reduce_range() -> bool:
    """Without VNNI, int8 kernels (fbgemm's and oneDNN's AVX2 ones) multiply u8 x s8 pairs into 16-bit sums,
    which can saturate on 8-bit activations (2 x 255 x 127 > 32,767); VNNI accumulates in 32 bits."""
    return not getattr(torch.cpu, "_is_vnni_supported", lambda: False)()


def activation_levels() -> int:
    """Steps on each side of zero of the qlinear route's uint8 activations: 127 (1..255 around 128), or 63
    (1..127 around 64: 7 bits, which cannot saturate) where ``reduce_range()``."""
    return 63 if reduce_range() else 127


def takes_int8(x: Tensor, q: Tensor) -> bool:
    """Whether x times the int8 weight q (out, in) runs the int8 kernel: float32 CPU tensors in inference,
    eager (not compiled or exported), a product large enough for its width (INT8_MIN_WORK)."""
    d_out, d_in = q.shape
    return (x.dtype == torch.float32 and not torch.is_grad_enabled() and eager_cpu(x) and x.dim() >= 1
            and pays(x.numel() // max(d_in, 1), d_in, d_out))


def pays(rows: int, d_in: int, d_out: int) -> bool:
    """Whether an int8 product of ``rows`` rows with a weight (d_in, d_out) beats float32 here (INT8_MIN_WORK)."""
    width = d_in * d_out / max(d_in + d_out, 1)
    least = min((work for floor, work in INT8_MIN_WORK.items() if width >= floor), default=None)
    return d_in >= 2 and least is not None and rows * d_in * d_out >= least


def _pin_rows(count: int, width: int) -> Tensor:
    """The rows appended to a normalised input: the range-pinning row (+1, -1, 0, ...), then zero rows
    (oneDNN's row-count padding, see onednn_int8_rows); made once per size (a decode step meets few)."""
    rows = _pins.get((count, width))
    if rows is None:
        rows = _pins[(count, width)] = torch.zeros(count, width)
        rows[0, 0], rows[0, 1] = 1.0, -1.0
    return rows


def _scratch(numel: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """This thread's reused buffer of ``dtype`` for the kernel's input (the kernel does not keep it): a fresh one
    per call can cost page faults."""
    name = f"buffer_{dtype}"
    buf = getattr(_local, name, None)
    if buf is None or buf.numel() < numel:
        with torch.inference_mode(False):  # made under inference_mode it could not be written outside it
            buf = torch.empty(numel, dtype=dtype)
            setattr(_local, name, buf)
    return buf[:numel]


def per_token_product(flat: Tensor, q: Tensor, scale: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """flat (rows, in) float32 times the int8 weight q (out, in), plus ``bias``: rows quantised one scale each
    (module docstring)."""
    engine = int8_engine()
    if engine == QLINEAR:
        return _qlinear_product(flat, q, scale, bias)
    rows, width = flat.shape
    total = max(onednn_int8_rows(rows + 1), ONEDNN_MIN_ROWS) if engine == "onednn" else rows + 1  # as in qlinear
    # max |x| per row as max(max x, -min x): two plain reductions (vector_norm(inf) / aminmax ran several times slower)
    row_max = torch.maximum(flat.amax(1, keepdim=True), flat.amin(1, keepdim=True).neg_()).clamp_min_(1e-30)
    normalised = _scratch(total * width).view(total, width)
    torch.mul(flat, row_max.reciprocal(), out=normalised[:rows])  # a product: division ran slower
    normalised[rows:].copy_(_pin_rows(total - rows, width))
    out = torch.ops.quantized.linear_dynamic(normalised, packed_weight(q, scale, engine), reduce_range())[:rows]
    out = out.mul_(row_max)
    return out if bias is None else out.add_(bias)


def _qlinear_product(flat: Tensor, q: Tensor, scale: Tensor, bias: Optional[Tensor]) -> Tensor:
    rows, width = flat.shape
    # oneDNN builds a kernel per row count: pad to a few sizes; and at least ONEDNN_MIN_ROWS, below which it
    # picks another kernel whose last rounding differs (a row's result would then depend on its batch)
    total = max(onednn_int8_rows(rows), ONEDNN_MIN_ROWS)
    levels = activation_levels()
    quantized = _scratch(total * width, torch.uint8).view(total, width)
    row_max = torch.empty(rows, dtype=torch.float32)  # the C pass writes float32 whatever the default dtype
    quantize_rows(flat, quantized[:rows], row_max, levels)
    quantized[rows:].fill_(levels + 1)  # the zero point: padding rows add nothing
    weight, weight_scale, weight_zero = packed_weight(q, scale, QLINEAR)
    out = torch.ops.onednn.qlinear_pointwise(quantized, 1.0 / levels, levels + 1, weight, weight_scale, weight_zero,
                                             None, 1.0, 0, torch.float32, "none", [], "")[:rows]
    return scale_rows(out, row_max, bias)


def _library() -> Optional[ctypes.CDLL]:
    """The compiled kernel library with the two per-token passes declared (None where it cannot be built)."""
    lib = load_library()
    if lib is not None and not getattr(lib, "_sru_int8_ready", False):
        pointer, integer = ctypes.c_void_p, ctypes.c_int64
        lib.sru_quantize_rows_u8.argtypes = [pointer, integer, integer, integer, pointer, pointer, integer]
        lib.sru_scale_rows.argtypes = [pointer, integer, integer, pointer, pointer, integer]
        lib.sru_quantize_rows_u8.restype = lib.sru_scale_rows.restype = None
        lib._sru_int8_ready = True
    return lib


def quantize_rows(flat: Tensor, out: Tensor, row_max: Tensor, levels: int) -> None:
    """out (rows, in) uint8 = round(flat * levels / m) + levels + 1 per row, m = max |row| (at least 1e-30; NaN stays),
    stored in row_max (rows,). ``flat`` and ``out`` contiguous."""
    rows, width = flat.shape
    lib = _library()
    if lib is not None:
        lib.sru_quantize_rows_u8(flat.data_ptr(), rows, width, levels, out.data_ptr(), row_max.data_ptr(),
                                 torch.get_num_threads())
        return
    torch.maximum(flat.amax(1), flat.amin(1).neg_(), out=row_max).clamp_min_(1e-30)
    steps = torch.mul(flat, (levels / row_max)[:, None]).add_(levels + 1.5)  # positive: truncation rounds
    out.copy_(steps.trunc_())


def scale_rows(out: Tensor, row_scale: Tensor, bias: Optional[Tensor]) -> Tensor:
    """out (rows, n) * row_scale[:, None] (+ bias), in place; returns out."""
    rows, width = out.shape
    lib = _library()
    if lib is None:
        out.mul_(row_scale[:, None])
        return out if bias is None else out.add_(bias)
    bias = None if bias is None else bias.float().contiguous()
    lib.sru_scale_rows(out.data_ptr(), rows, width, row_scale.data_ptr(), None if bias is None else bias.data_ptr(),
                       torch.get_num_threads())
    return out


def int8_linear(x: Tensor, q: Tensor, scale: Tensor, bias: Optional[Tensor]) -> Tensor:
    """``F.linear(x, q * scale, bias)`` with the int8 weight q (out, in): per-token int8 on float32 CPU
    tensors without autograd when the product is large enough; the dequantised weight in float32
    otherwise (small products, autograd, export, other devices)."""
    if takes_int8(x, q):
        out = per_token_product(x.reshape(-1, x.shape[-1]).contiguous(), q, scale, bias)
        return out.view(*x.shape[:-1], q.shape[0])
    weight = dequantized_weight(q, scale, x.dtype)
    return torch.nn.functional.linear(x, weight, None if bias is None else bias.to(x.dtype))


def clear_packs() -> None:
    """Forget every packed and dequantised int8 weight."""
    _packs.clear()
    _dequantized.clear()
