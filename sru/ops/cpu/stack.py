"""A whole plain SRU stack in inference as one C call (``sru_stack.cpp``): the matmul of every
layer through the BLAS torch uses, then the fused recurrence, with no Python between layers.

Why: at one decoding step (L = 1, B = 1) the per-layer Python of ``inference.forward_stack`` (an
aten matmul call, allocations, a ctypes call per layer) plus ``SRU.forward``'s general argument
handling cost about as much again as reading the weights (docs/design_notes.md#one-step-decoding). Here ``SRU.forward`` checks a handful of flags, reuses a plan cached on the module
(rebuilt when a parameter's identity or storage, the dtype, the mode, a dropout, the skip scale
or the backend changes: ``plan_key``) and makes one ctypes call.

"Plain" = every layer has its own weight (no projection, no ``custom_m``), no layer norm, the
CPU backend, no dropout to draw (eval mode or zero dropout); anything else keeps the general
inference path, which gives the same numbers (same BLAS routine, same recurrence kernel).
"""
import ctypes
import operator
import threading
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import gemm as cpu_gemm
from .int8 import pays as int8_pays
from .inference import forward_stack, kernel_cell, layer_args
from .kernel import skip_mode_of

_DTYPES = (torch.float32, torch.float64)
_ENTRY = {torch.float32: "sru_stack_forward_f32", torch.float64: "sru_stack_forward_f64"}
SMALL_ROWS = 8  # sru_stack.cpp's kSmallRows
# Up to SMALL_ROWS rows an int8 cell's step leaves the C loop only from this many multiply-adds per product:
# there int8 must beat that loop, not torch's product (INT8_MIN_WORK's yardstick). A 2 x 512 stack's step
# (512 x 1,536, 2 threads; python -m bench.precision.layer --decode-only 1,2,3,4,6,8,16) ran int8 0.85-0.95x
# the loop's speed at 2-3 rows, 0.91-1.11x at 4, 1.20x at 6, 1.39-1.61x at 8: int8 from 6 rows of 512 x 1,536
# (the current row: docs/speed/low_precision.md, "decode steps B = 1 / 2 / 4 / 5 / 6 / 8 / 16").
INT8_MIN_WORK_BESIDE_LOOP = 1 << 22
GEMM_MISSING = 2  # sru_stack.cpp's status when torch exports no sgemm_/dgemm_


class StackLayer(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_void_p) for name in ("weight", "weight_c", "bias")]
                + [(name, ctypes.c_int64) for name in
                   ("in_features", "hidden", "dirs", "k", "skip_mode", "use_tanh")]
                + [("scale_x", ctypes.c_double)])


class StackArgs(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_void_p) for name in ("x", "c0", "mask_pad", "h", "c_last", "workspace")]
                + [("layers", ctypes.POINTER(StackLayer))]
                + [(name, ctypes.c_int64) for name in ("num_layers", "length", "batch", "num_threads")])


def check_mirrors(lib: ctypes.CDLL, mirrors: Sequence[Tuple[str, type]], where: str) -> None:
    """Raise where a ctypes mirror's size differs from its C struct's (the library's ``sru_*_size()``)."""
    for name, struct in mirrors:
        getattr(lib, name).restype = ctypes.c_int64
        if getattr(lib, name)() != ctypes.sizeof(struct):
            raise RuntimeError(f"{struct.__name__} layout mismatch between sru_args.h and {where}")


def configure_stack(lib: ctypes.CDLL) -> None:
    """Declare the stack entry points and check the struct mirrors (once per library)."""
    if getattr(lib, "_sru_stack_ready", False):
        return
    check_mirrors(lib, (("sru_stack_args_size", StackArgs), ("sru_stack_layer_size", StackLayer)), "stack.py")
    for name in _ENTRY.values():
        getattr(lib, name).argtypes = [ctypes.POINTER(StackArgs)]
        getattr(lib, name).restype = ctypes.c_int
    lib._sru_stack_ready = True


# Every plain cell attribute a plan depends on (``_plain``, ``kernel_cell`` and the StackLayer
# fields), read from the instance dict in one C call (attribute access through nn.Module costs
# several times more, and this runs at every decoding step). custom_m, a layer norm and the
# parameters live in ``_modules`` / ``_parameters``: keyed by identity, and storage (``current``).
CELL_STATE = operator.itemgetter("training", "_backend", "_gemm", "_precision", "dropout", "rnn_dropout",
                                  "_scale_x_value", "rescale", "activation_type", "has_skip_term")


def plan_key(cells: Sequence) -> tuple:
    """What a cached plan must still match: per cell its mode and options, and the identity of
    its parameters and submodules (a new layer norm, projection or custom_m). No global counter:
    the key is read from the cells themselves on every call (cheap next to a step)."""
    key = []
    for cell in cells:
        key.append(CELL_STATE(cell.__dict__))
        key.extend(map(id, cell._parameters.values()))
        key.extend(map(id, cell._modules.values()))
    return tuple(key)


class StackPlan:
    """The C layer array of one stack for one dtype, or ``usable=False`` when the stack is not
    plain (then the caller takes the general path until the cells change)."""

    def __init__(self, lib: ctypes.CDLL, cells: Sequence, dtype: torch.dtype):
        self.key, self.dtype, self.usable = plan_key(cells), dtype, False
        self.tensors = tuple(p for cell in cells for p in cell._parameters.values() if p is not None)
        self.pointers = tuple(map(Tensor.data_ptr, self.tensors))
        if dtype not in _DTYPES or not all(_plain(cell, dtype) for cell in cells):
            return
        configure_stack(lib)
        self.lib, self.call = lib, getattr(lib, _ENTRY[dtype])
        # where a layer's product routes to oneDNN (``gemm_is_mkl`` false): forward_stack's plan, made once
        self.routed = tuple(layer_args(cell) for cell in cells)
        self.layers = (StackLayer * len(cells))()
        for slot, cell in zip(self.layers, cells):
            slot.weight, slot.weight_c, slot.bias = (cell.weight.data_ptr(), cell.weight_c.data_ptr(),
                                                     cell.bias.data_ptr())
            slot.in_features, slot.hidden = cell.input_size, cell.hidden_size
            slot.dirs, slot.k = cell.num_directions, cell.num_matrices
            slot.skip_mode = skip_mode_of(cell)
            slot.use_tanh, slot.scale_x = int(cell.activation_type), float(cell.skip_scale)
        self.num_layers = len(cells)
        # (in, out, library) per layer: the stack's C code calls MKL's sgemm, so the plan runs
        # only where the GEMM dispatch picks MKL for every layer (``gemm_is_mkl``)
        self.products = tuple((cell.weight.shape[0], cell.weight.shape[1], cell.gemm,
                               cell._modules.get("weight_int8") is not None) for cell in cells)
        self._mkl_rows: dict = {}
        self._small_plain = all(library in ("auto", "mkl") and not int8 for _, _, library, int8 in self.products)
        self.width = cells[-1].output_size
        self.per_row = max(cell.output_size * cell.num_matrices for cell in cells) + self.width
        self._scratch = threading.local()
        self.usable = True

    def current(self, cells: Sequence, dtype: torch.dtype) -> bool:
        """Whether the plan still describes the cells: the same key (``plan_key``) and every
        parameter still has the storage it had (``.to()``, ``.double()`` and ``p.data = ...``
        swap storages in place; a stale pointer would read freed memory)."""
        return (dtype is self.dtype and plan_key(cells) == self.key
                and tuple(map(Tensor.data_ptr, self.tensors)) == self.pointers)

    def gemm_is_mkl(self, rows: int) -> bool:
        """Whether the GEMM dispatch (sru/ops/cpu/gemm.py) picks MKL for every layer at ``rows``
        rows: cached per (row bucket, threads, environment override). Runs at every decoding
        step, so the common case (a few rows, no layer forced to oneDNN, no SRU_CPU_GEMM) is two tests."""
        if self.dtype is not torch.float32:
            return True
        env = cpu_gemm.env_override()
        if rows <= SMALL_ROWS and self._small_plain and env is None:
            return True  # the C code's own loop, as before the dispatch
        key = (rows if rows <= SMALL_ROWS else cpu_gemm.row_bucket(rows), torch.get_num_threads(), env)
        found = self._mkl_rows.get(key)
        if found is None:  # up to SMALL_ROWS the C code's own loop beats any BLAS: kept unless forced
            found = self._mkl_rows[key] = all(
                cpu_gemm.requested(library) != "onednn" and not (int8 and int8_pays(rows, d_in, d_out)
                                                                  and rows * d_in * d_out >= INT8_MIN_WORK_BESIDE_LOOP)
                if rows <= SMALL_ROWS
                else not int8 and cpu_gemm.choose("fwd", rows, d_in, d_out, library) == "mkl"
                for d_in, d_out, library, int8 in self.products)
        return found

    def run(self, x: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """x contiguous (L, B, in); c0 None or contiguous (layers, B, width) in x's dtype;
        mask_pad None or contiguous uint8 (L, B). Returns (h, c_last) like forward_stack, or None
        when this torch has no BLAS symbol to call (the plan is then marked unusable). Where the GEMM
        dispatch sends a layer's product to oneDNN, ``forward_stack`` runs the layers with the plan
        made when this one was: the route is chosen per model and row count, never rebuilt per call."""
        length, batch = x.shape[0], x.shape[1]
        if not self.gemm_is_mkl(length * batch):
            return forward_stack(self.lib, x, self.routed, c0, mask_pad)
        h = x.new_empty(length, batch, self.width)
        c_last = x.new_empty(self.num_layers, batch, self.width)
        # U and one layer's output: scratch, reused by this thread while it is large enough
        # (the GIL is released during the call, so another thread needs its own).
        rows, scratch = length * batch, self._scratch.__dict__
        workspace, args = scratch.get("buffer"), scratch.get("args")
        if workspace is None or workspace.numel() < rows * self.per_row:
            workspace = scratch["buffer"] = x.new_empty(rows * self.per_row)
        if args is None:  # one argument struct per thread, refilled on every call
            args = scratch["args"] = StackArgs(layers=self.layers, num_layers=self.num_layers)
            scratch["ref"] = ctypes.byref(args)
        args.x, args.c0 = x.data_ptr(), None if c0 is None else c0.data_ptr()
        args.mask_pad = None if mask_pad is None else mask_pad.data_ptr()
        args.h, args.c_last, args.workspace = h.data_ptr(), c_last.data_ptr(), workspace.data_ptr()
        args.length, args.batch, args.num_threads = length, batch, torch.get_num_threads()
        status = self.call(scratch["ref"])
        if rows > 4096:
            scratch.pop("buffer")  # a long sequence's U is not kept alive between calls
        if status == GEMM_MISSING:
            self.usable = False
            return None
        if status != 0:  # unreachable for valid SRUCells (checked when the plan was built)
            raise RuntimeError(f"sru CPU stack kernel: unsupported layer layout (status {status})")
        return h, c_last


def _plain(cell, dtype: torch.dtype) -> bool:
    """A kernel cell (``inference.kernel_cell``) without projection or layer norm, whose weight
    is contiguous (the C code reads it row-major), in float precision (no ``sru.to_precision`` of its own:
    the C code's products are fp32)."""
    params = cell._parameters
    return (kernel_cell(cell, dtype) and cell.own_precision is None and params.get("weight_proj") is None
            and cell._modules.get("layer_norm") is None and params["weight"].is_contiguous())
