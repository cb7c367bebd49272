"""What ``SRUCell``/``SRUppCell`` and ``SRU``/``SRUpp`` have in common.

``RecurrentCellBase``: backend selection (validated when assigned), the skip scale alpha kept as a
Python float beside the ``scale_x`` buffer (so forward never syncs on it, and a checkpoint's
value wins when loaded), old pickles, per-sequence dropout masks, the recurrence call with its
half-precision rule, and ``extra_repr``. ``StackBase``: the stack's ``backend`` and the
``nn_rnn_compatible_return`` layout of c.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from sru.checks import check_layer_sizes
from sru.linear import DispatchedLinear
from sru.ops import BACKENDS, LIBRARIES, check_library, elementwise_recurrence, matmul
from sru.ops.quantized import Int8Weight
from sru.ops.precision import Precision, explicit_float_precision, recurrence_dtype, without_autocast
from sru.ops.errors import TritonKernelError
from sru.ops.shapes import num_directions, state_width
from sru.ops.spec import RecurrenceSpec


def dropout_mask(like: Tensor, size: Tuple[int, int], p: float) -> Tensor:
    """A dropout mask of ``size`` (one row per sequence), scaled by 1 / (1 - p)."""
    return like.new_empty(size).bernoulli_(1 - p).div_(1 - p)


class RecurrentCellBase(nn.Module):
    """A layer whose U the subclass computes and whose recurrence is ``sru.ops``.

    Subclasses set ``hidden_size``, ``bidirectional``, ``has_skip_term``, ``rescale``,
    ``activation``, ``amp_recurrence_fp16``, ``dropout``, ``rnn_dropout``, ``output_size``,
    ``input_size`` and the ``scale_x`` buffer, and list in ``_REPR_DEFAULTS`` the options
    ``extra_repr`` shows when they differ from their default."""

    scale_x: Tensor
    __jit_unused_properties__ = ["backend", "gemm", "precision", "skip_scale"]  # torch.jit.script: Python only
    _REPR_DEFAULTS: Tuple[Tuple[str, object], ...] = ()
    _PICKLE_DEFAULTS: Tuple[Tuple[str, object], ...] = ()

    def _set_options(self, input_size: int, hidden_size: int, dropout: float, rnn_dropout: float,
                     bidirectional: bool, use_tanh: bool, **options) -> None:
        """The constructor arguments both cells have, checked, with what derives from them;
        ``options`` are stored as given (``backend`` through its check)."""
        check_layer_sizes(type(self).__name__, input_size, hidden_size, dropout, rnn_dropout)
        self.input_size = input_size
        self.hidden_size = hidden_size  # per direction
        self.num_directions = num_directions(bidirectional)
        self.output_size = state_width(hidden_size, bidirectional)
        self.dropout = float(dropout)
        self.rnn_dropout = float(rnn_dropout)
        self.bidirectional = bidirectional
        self.activation = "tanh" if use_tanh else "none"
        self.activation_type = 1 if use_tanh else 0
        self._precision = None  # None: as the surrounding autocast says; BF16: set by sru.to_precision
        for name, value in options.items():
            setattr(self, name, value)

    @property
    def backend(self) -> str:
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:  # checked here, not at the first forward
        if value not in BACKENDS:
            raise ValueError(f"{type(self).__name__} expected backend in {BACKENDS}, got {value!r}")
        self._backend = value

    @property
    def gemm(self) -> str:
        """The CPU GEMM library of the projections: auto / mkl / onednn (sru/ops/cpu/gemm.py)."""
        return self._gemm

    @gemm.setter
    def gemm(self, value: str) -> None:
        self._gemm = check_library(value, type(self).__name__)
        for module in self.modules():  # SRU++: the dispatched Linear layers of the transform
            if isinstance(module, DispatchedLinear):
                module.gemm = value

    _QUANTIZED = ("weight_proj", "weight")  # the projections ``quantize_int8_`` gives an int8 copy

    @property
    def precision(self) -> Precision:
        """INT8 once ``sru.quantize_dynamic`` gave this layer int8 weights (read from the layer's own
        structure, so copies and checkpoints keep it); else what ``sru.to_precision`` set (BF16), else FP32
        (then a surrounding autocast, e.g. training's ``trainer.precision=bf16``, still applies)."""
        if any(isinstance(m, Int8Weight) for m in self._modules.values()):
            return Precision.INT8
        return self._precision or Precision.FP32

    @precision.setter
    def precision(self, value) -> None:
        self._precision = explicit_float_precision(value, type(self).__name__)

    @property
    def own_precision(self):
        """What ``sru.to_precision`` set on this layer (BF16), or None: the surrounding autocast decides.
        The CPU routes read it to send such a layer's products down the bf16 route."""
        return self._precision

    def quantize_int8_(self) -> bool:
        """In place: each projection weight gets its int8 copy (an ``Int8Weight`` submodule named
        ``<weight>_int8``) and keeps the dequantised values itself, so that every float route (autograd,
        export, small products) computes the same function. A layer with ``custom_m`` or without its own
        weight is left as it is (returns False)."""
        if getattr(self, "custom_m", None) is not None or self._parameters.get("weight") is None:
            return False
        for name in self._QUANTIZED:
            param = self._parameters.get(name)
            if param is None:
                continue
            int8 = Int8Weight.of(param.t())  # stored (in, out): the int8 weight is (out, in)
            self.add_module(name + "_int8", int8)
            with torch.no_grad():
                param.copy_(int8.dequantized().t())
            param.requires_grad_(False)
        return True

    def project(self, x: Tensor, name: str = "weight") -> Tensor:
        """x (rows, in) times the parameter ``name`` (``weight`` or ``weight_proj``, stored (in, out))
        through the projection entry point, with its int8 copy when the layer is quantised."""
        return matmul(x, self._parameters[name], self._gemm, self._modules.get(name + "_int8"), self._precision)

    @property
    def skip_scale(self) -> float:
        """The factor on the skip input x (k = 3): scale_x with ``rescale``, else 1."""
        return self._scale_x_value if self.rescale else 1.0

    def set_scale_x(self, value: float) -> None:
        """The skip scale alpha: the ``scale_x`` buffer (what checkpoints carry) and its Python copy."""
        self.scale_x.fill_(value)
        self._scale_x_value = float(self.scale_x[0])

    def recurrence_spec(self) -> RecurrenceSpec:
        return RecurrenceSpec(self.hidden_size, self.bidirectional, self.has_skip_term,
                              self.skip_scale, self.activation)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        # A checkpoint's scale_x wins over the one computed at construction.
        self._scale_x_value = float(self.scale_x[0])

    def __setstate__(self, state):
        # Earlier versions kept backend / gemm in ``__dict__`` under their property names (a quantised
        # cell's gemm said "int8"; its int8 copies are no longer read from there: quantise again).
        state = dict(state)
        backend, gemm = state.pop("backend", "auto"), state.pop("gemm", "auto")
        super().__setstate__(state)
        # Whole modules pickled by the official package (same class path) lack the attributes
        # added here or in later versions.
        self.__dict__.setdefault("_backend", backend)
        self.__dict__.setdefault("_gemm", gemm if gemm in LIBRARIES else "auto")
        self.__dict__.setdefault("_precision", None)
        for name, default in self._PICKLE_DEFAULTS:
            if name not in self._modules:  # custom_m lives in _modules: an entry here would hide it
                self.__dict__.setdefault(name, default)
        self.__dict__.setdefault("_scale_x_value", float(self.scale_x[0]))
        for name in self._QUANTIZED:  # an earlier version's int8 copies were two buffers each
            q, scale = self._buffers.pop(name + "_int8", None), self._buffers.pop(name + "_scale", None)
            if q is not None and scale is not None:
                self.add_module(name + "_int8", Int8Weight(q, scale))

    def _dropout(self, input: Tensor, layout) -> Tuple[Tensor, Optional[Tensor]]:
        """In training: rnn_dropout on the input and the dropout mask on the gated term, one
        mask per sequence shared over time (``layout``'s ``batch`` of them, brought onto the tokens of
        ``input`` by ``layout.per_token``: sru/ops/packing.py). Returns (input, mask_c or None)."""
        if not self.training:
            return input, None
        if self.rnn_dropout > 0:
            input = input * layout.per_token(dropout_mask(input, (layout.batch, input.size(-1)), self.rnn_dropout))
        mask_c = None
        if self.dropout > 0:
            mask_c = dropout_mask(input, (layout.batch, self.output_size), self.dropout)
        return input, mask_c

    def _recurrence(self, U: Tensor, x: Optional[Tensor], weight_c: Tensor, c0: Optional[Tensor],
                    mask_c: Optional[Tensor], layout) -> Tuple[Tensor, Tensor]:
        """The recurrence over ``layout`` (padded or packed, sru/ops/packing.py) with this layer's spec and
        backend. Under autocast U arrives in half precision; the recurrence accumulates c over time, so it
        runs in float32 unless amp_recurrence_fp16 asks for float16 (the official rule)."""
        dtype = recurrence_dtype(U.dtype, self.amp_recurrence_fp16)
        cast = (lambda t: t if t is None or t.dtype == dtype else t.to(dtype))
        with without_autocast(U.device.type):
            try:
                return layout.recurrence(
                    cast(U), cast(x), cast(weight_c), cast(self.bias), cast(c0), self.hidden_size,
                    cast(mask_c), bidirectional=self.bidirectional, has_skip_term=self.has_skip_term,
                    scale_x=self.skip_scale, activation=self.activation, backend=self.backend)
            except TritonKernelError as err:  # one line that also names this layer
                raise TritonKernelError(f"{type(self).__name__}({self.extra_repr()}): "
                                        f"{err}") from None

    def extra_repr(self) -> str:
        shown = [f"{name}={value!r}" if isinstance(value, str) and name in ("backend", "gemm")
                 else f"{name}={value}"
                 for name, default in self._REPR_DEFAULTS
                 for value in (getattr(self, name),) if value != default]
        return ", ".join([f"{self.input_size}, {self.hidden_size}", *shown])


def per_cell(name: str, doc: str) -> property:
    """A stack option that belongs to its layers: read from the first, set on every one."""
    def get(stack):
        return getattr(stack.rnn_lst[0], name)

    def set_all(stack, value) -> None:
        for cell in stack.rnn_lst:
            setattr(cell, name, value)
    return property(get, set_all, doc=doc)


class StackBase(nn.Module):
    """A stack of cells in ``rnn_lst`` with one backend."""

    __jit_unused_properties__ = ["backend", "gemm"]  # torch.jit.script: Python only

    def _set_options(self, input_size: int, hidden_size: int, num_layers: int,
                     bidirectional: bool, **options) -> None:
        """What both stacks store, with what derives from it; ``options`` as given."""
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = state_width(hidden_size, bidirectional)
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.num_directions = num_directions(bidirectional)
        for name, value in options.items():
            setattr(self, name, value)

    backend = per_cell("backend", "The recurrence backend of every layer (``sru.ops.BACKENDS``).")
    gemm = per_cell("gemm", "The CPU GEMM library of every layer's projections: auto / mkl / onednn.")

    def _stack_c(self, c_last, batch: int) -> Tensor:
        """The last c of every layer: (layers, B, dirs*d), or (layers*dirs, B, d) with
        ``nn_rnn_compatible_return`` (nn.LSTM's layout)."""
        c_stack = torch.stack(c_last) if isinstance(c_last, (list, tuple)) else c_last
        if not self.nn_rnn_compatible_return:
            return c_stack
        return (c_stack.view(self.num_layers, batch, self.num_directions, self.hidden_size)
                .transpose(1, 2).reshape(-1, batch, self.hidden_size))
