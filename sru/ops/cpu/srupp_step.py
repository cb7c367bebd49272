"""SRU++'s decoding step (L = 1) of a whole stack as one C call (``srupp_step.cpp``): per layer the layer
norms, the products, the attention of the step's query over the cached keys and values (the kernel of
decode_attention.cpp) and the recurrence, with no Python between them.

Why: the reference step (sru/srupp_decode.py) runs some forty small torch ops a layer; at B = 1 their
dispatch cost about six times the step's products (``python -m bench.speed --decode``,
docs/design_notes.md#one-step-decoding). Here a step is a check of the cached plan, the cache's row
reservation (sru/srupp_decoding/cache.py), two allocations and one ctypes call.

The plan is made once per model (``SruppStepPlan``, cached by the caller) and only *checked* per call
(``ModuleWatch.current``: the same modules, parameters, storages and modes). The layer
(sru/srupp_decoding/one_call.py) says which modules and tensors a layer has (``StepLayer``); this module says
whether the C step takes them (``SruppStepPlan.usable``): float32 contiguous weights, affine layer norms, a
head size the attention kernel is compiled for, an AVX-512 build. Anything else keeps the reference step,
which gives the same numbers up to float rounding (another summation order in the products, the layer norms
and the attention's softmax).
"""
import ctypes
import operator
import threading
from typing import NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from .decoding import HEAD_SIZES, attention_kernel
from .inference import recurrence_args
from .stack import CELL_STATE, GEMM_MISSING, check_mirrors

NORMS = 4  # sru_args.h SruppLayer's norm slots: the cell's input, z, the attention's output, the cell's h
STATUS = {1: "a layer layout the recurrence does not take", 3: "a head size the attention kernel does not take"}


class SruppLayer(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_void_p) for name in ("w1", "w_kv", "w_u", "alpha", "weight_c", "bias")]
                + [("norm_w", ctypes.c_void_p * NORMS), ("norm_b", ctypes.c_void_p * NORMS),
                   ("keys", ctypes.c_void_p), ("values", ctypes.c_void_p)]
                + [(name, ctypes.c_int64) for name in ("in_features", "proj", "heads", "positions", "hidden",
                                                       "dirs", "k", "skip_mode", "use_tanh")]
                + [("scale_x", ctypes.c_double), ("eps", ctypes.c_double * NORMS)])


class SruppStepArgs(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_void_p) for name in ("x", "w_in", "c0", "h", "c_last", "workspace")]
                + [("layers", ctypes.POINTER(SruppLayer)), ("attention", ctypes.c_void_p)]
                + [(name, ctypes.c_int64) for name in ("num_layers", "batch", "input_size", "num_threads")])


class StepLayer(NamedTuple):
    """What the step reads of one SRU++ layer: its cell (the recurrence: ``inference.recurrence_args``), the
    transform's weights (w_kv and alpha None for a layer without attention) and ``norms``, one
    ``nn.LayerNorm`` or None per slot (``NORMS``)."""
    cell: nn.Module
    w1: Tensor
    w_kv: Optional[Tensor]
    w_u: Tensor
    alpha: Optional[Tensor]
    norms: Tuple[Optional[nn.LayerNorm], ...]
    heads: int


_registrations = [0]  # parameters, buffers and submodules registered anywhere since the first watch began
_hooks: list = []


def _count(module, name, value) -> None:
    _registrations[0] += 1


def _watch_registrations() -> None:
    """torch's global registration hooks count every parameter, buffer and submodule set on any module (a
    parameter or a layer norm replaced, a submodule added): one integer to compare per step instead of a
    dictionary lookup per parameter. Installed once, on the first plan; a registration elsewhere in the
    process (another model built) only makes the next step rebuild its plan."""
    if not _hooks:
        from torch.nn.modules import module as torch_module
        _hooks.extend(register(_count) for register in (torch_module.register_module_parameter_registration_hook,
                                                         torch_module.register_module_buffer_registration_hook,
                                                         torch_module.register_module_module_registration_hook))


class ModuleWatch:
    """Whether the modules a plan was made from still hold what it read: no parameter, buffer or submodule
    registered anywhere since (``_watch_registrations``) and none removed, every parameter still at the
    address the plan holds (``.to()``, ``p.data = ...`` move a parameter's storage in place), the modules
    that draw dropout (``drawing``: a mode that changes what they compute) in eval mode and the cells' options
    (their mode among them) unchanged. Each check costs a visible share of a B = 1 step (the Python objects it
    touches are out of cache after the step's products), so only what the plan depends on is read. The plan
    keeps the storages it points into alive, so that even a change it has not seen yet never makes the C code
    read freed memory."""

    def __init__(self, modules: Sequence[nn.Module], cells: Sequence[nn.Module], drawing: Sequence[nn.Module]):
        _watch_registrations()
        self.registrations = _registrations[0]
        self.containers = [d for m in modules for d in (m._parameters, m._modules)]
        self.sizes = list(map(len, self.containers))  # a name deleted
        self.tensors = [t for d in self.containers for t in d.values() if isinstance(t, Tensor)]
        self.pointers = list(map(Tensor.data_ptr, self.tensors))
        self.storages = [t.untyped_storage() for t in self.tensors]
        self.states = [m.__dict__ for m in drawing]
        # the cells' options too (scale_x, activation, ...): what the C layers were filled from
        self.cell_states = [cell.__dict__ for cell in cells]
        self.cell_options = list(map(CELL_STATE, self.cell_states))

    def current(self) -> bool:
        return (_registrations[0] == self.registrations
                and list(map(Tensor.data_ptr, self.tensors)) == self.pointers
                and list(map(len, self.containers)) == self.sizes
                and not any(map(operator.itemgetter("training"), self.states))
                and list(map(CELL_STATE, self.cell_states)) == self.cell_options)


def configure(lib: ctypes.CDLL) -> None:
    """Declare the step's entry point and check the struct mirrors (once per library)."""
    if getattr(lib, "_sru_srupp_step_ready", False):
        return
    check_mirrors(lib, (("sru_srupp_step_args_size", SruppStepArgs), ("sru_srupp_layer_size", SruppLayer)),
                  "srupp_step.py")
    lib.sru_srupp_step_f32.argtypes = [ctypes.POINTER(SruppStepArgs)]
    lib.sru_srupp_step_f32.restype = ctypes.c_int
    lib._sru_srupp_step_ready = True


def _float32(*tensors: Optional[Tensor]) -> bool:
    return all(t is None or (t.dtype is torch.float32 and t.is_cpu and t.is_contiguous()) for t in tensors)


def _takes(layer: StepLayer) -> bool:
    """Whether the C step computes this layer (module docstring)."""
    cell, proj = layer.cell, layer.w1.shape[0]
    norms_ok = all(n is None or (n.weight is not None and n.bias is not None and _float32(n.weight, n.bias)
                                 and len(n.normalized_shape) == 1) for n in layer.norms)
    return (norms_ok and _float32(layer.w1, layer.w_kv, layer.w_u, layer.alpha, *recurrence_args(cell)[:2])
            and cell.backend in ("auto", "cpu") and cell.num_directions == 1
            and (layer.w_kv is None or (proj % layer.heads == 0 and proj // layer.heads in HEAD_SIZES)))


class SruppStepPlan:
    """The C layer array of one SRU++ stack, or ``usable=False`` (then the caller keeps the reference step
    until ``watch`` says the modules changed). ``attention_layers``: the indices of the layers whose keys and
    values the step appends to (the caller fills their ``keys`` / ``values`` / ``positions`` per call)."""

    def __init__(self, lib: Optional[ctypes.CDLL], layers: Sequence[StepLayer], w_in: Optional[Tensor],
                 input_size: int, modules: Sequence[nn.Module], drawing: Sequence[nn.Module] = ()):
        self.watch, self.usable = ModuleWatch(modules, [layer.cell for layer in layers], drawing), False
        kernel = attention_kernel()
        if lib is None or kernel is None or not _float32(w_in) or not all(map(_takes, layers)):
            return
        configure(lib)
        self.call = lib.sru_srupp_step_f32
        self.layers = (SruppLayer * len(layers))()
        for slot, layer in zip(self.layers, layers):
            _fill(slot, layer)
        self.attention_layers = tuple(i for i, layer in enumerate(layers) if layer.w_kv is not None)
        self.key_bytes = tuple(4 * layers[i].w1.shape[0] for i in self.attention_layers)  # a position's key, float32
        widest_in = max([input_size] + [layer.w1.shape[1] for layer in layers])
        widest_u = max(layer.w_u.shape[0] for layer in layers)
        self.width = layers[-1].cell.output_size
        proj = max(layer.w1.shape[0] for layer in layers)
        self.per_row = widest_in + 6 * proj + widest_u + 2 * self.width  # srupp_step.cpp's workspace
        self.num_layers, self.input_size = len(layers), input_size
        self.w_in = None if w_in is None else w_in.data_ptr()
        self.attention = ctypes.cast(kernel.sru_decode_attention, ctypes.c_void_p).value
        self._scratch = threading.local()
        self.usable = True

    def run(self, x: Tensor, c0: Tensor, caches: Sequence[Tuple[int, int, int]]) -> Optional[Tuple[Tensor, Tensor]]:
        """x (B, input_size) and c0 (layers, B, width) contiguous float32; ``caches``: per attention layer (in
        ``attention_layers``' order) the addresses of the first key and value rows its query attends and how
        many (rows of contiguous (capacity, B, proj) float32 buffers; the last one the step's own, written here).
        Returns h (B, width) and c (layers, B, width), or None when this torch has no BLAS symbol for B > 8 rows
        (the plan is then unusable)."""
        batch = x.shape[0]
        h = x.new_empty(batch, self.width)
        c_last = x.new_empty(self.num_layers, batch, self.width)
        scratch = self._scratch.__dict__  # per thread: the GIL is released during the call
        if scratch.get("rows", 0) < batch:  # the workspace, kept while it is large enough
            scratch["buffer"], scratch["rows"] = x.new_empty(batch * self.per_row), batch
            if "args" in scratch:
                scratch["args"].workspace = scratch["buffer"].data_ptr()
        if "args" not in scratch:  # this thread's copy of the layers: their cache fields change per call
            layers = scratch["layers"] = (SruppLayer * self.num_layers)()
            ctypes.memmove(layers, self.layers, ctypes.sizeof(layers))
            scratch["args"] = SruppStepArgs(layers=layers, num_layers=self.num_layers, input_size=self.input_size,
                                            w_in=self.w_in, attention=self.attention,
                                            workspace=scratch["buffer"].data_ptr())
            scratch["ref"] = ctypes.byref(scratch["args"])
            scratch["slots"] = [layers[i] for i in self.attention_layers]
        for slot, (keys, values, positions) in zip(scratch["slots"], caches):
            slot.keys, slot.values, slot.positions = keys, values, positions
        args = scratch["args"]
        args.x, args.c0, args.h, args.c_last = x.data_ptr(), c0.data_ptr(), h.data_ptr(), c_last.data_ptr()
        args.batch, args.num_threads = batch, torch.get_num_threads()
        status = self.call(scratch["ref"])
        if status == GEMM_MISSING:  # checked before any work: the caller runs the reference step
            self.usable = False
            return None
        if status != 0:  # 1 and 3 are refused when the plan is made
            raise RuntimeError(f"sru SRU++ decoding step: {STATUS.get(status, status)} (status {status})")
        return h, c_last


def _fill(slot: SruppLayer, layer: StepLayer) -> None:
    """One SruppLayer from a StepLayer (the per-call keys, values and positions stay unset)."""
    weight_c, bias, hidden, dirs, k, skip_mode, use_tanh, scale_x = recurrence_args(layer.cell)
    slot.w1, slot.w_u = layer.w1.data_ptr(), layer.w_u.data_ptr()
    slot.w_kv = None if layer.w_kv is None else layer.w_kv.data_ptr()
    slot.alpha = None if layer.alpha is None else layer.alpha.data_ptr()
    slot.weight_c, slot.bias = weight_c.data_ptr(), bias.data_ptr()
    for i, norm in enumerate(layer.norms):
        slot.norm_w[i] = None if norm is None else norm.weight.data_ptr()
        slot.norm_b[i] = None if norm is None else norm.bias.data_ptr()
        slot.eps[i] = 0.0 if norm is None else float(norm.eps)
    slot.in_features, slot.proj, slot.heads = layer.w1.shape[1], layer.w1.shape[0], layer.heads
    slot.hidden, slot.dirs, slot.k, slot.skip_mode = hidden, dirs, k, skip_mode
    slot.use_tanh, slot.scale_x = int(bool(use_tanh)), float(scale_x)
