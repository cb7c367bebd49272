"""SRU and SRUCell: parameters, initialization, dropout masks, layer norm and dispatch.

The modules are drop-in compatible with the official ``sru`` 2.x package: same constructor
arguments and defaults, same attribute, parameter and buffer names (``rnn_lst.{i}.weight``,
``weight_proj``, ``weight_c``, ``bias``, ``scale_x``, ``layer_norm``), so its checkpoints load
with ``load_state_dict(strict=True)``. The elementwise recurrence itself lives in ``sru.ops``;
this file only computes U with one matrix product and hands everything to
``elementwise_recurrence``. See ``docs/sru.md`` for usage.
"""
import copy
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence

from sru.custom_m import custom_m_UV
from sru.checks import (check_cell_input, check_layer_sizes, check_module, check_options, check_stack_input,
                        empty_outputs)
from sru.cell_base import RecurrentCellBase, StackBase
from sru.initialization import reset_cell_parameters
from sru.forward_routes import Route, choose_route
from sru.ops.backends import linear_recurrence, run_inference_path, run_stack
from sru.ops.packing import PaddedLayout
from sru.ops.tracing import quiet_tracer, tracing_loudly
from sru.packed import forward_packed_sequence, forward_varlen
from sru.scripting.cells import PackedAsTuple, ScriptableCell, ScriptableStack


class SRUCell(ScriptableCell, RecurrentCellBase):
    """One SRU layer (both directions when bidirectional), like ``nn.LSTMCell`` for a sequence.

    Input (L, B, input_size) or a single step (B, input_size); c0 (B, dirs*hidden_size);
    mask_pad (L, B), nonzero = padded step. Returns h (L, B, dirs*hidden_size) (or
    (B, dirs*hidden_size) for a single step) and the last c (B, dirs*hidden_size).
    """

    _REPR_DEFAULTS = (("projection_size", 0), ("dropout", 0), ("rnn_dropout", 0),
                      ("bidirectional", False), ("highway_bias", 0), ("activation", "none"),
                      ("v1", False), ("rescale", None),  # rescale: always shown
                      ("has_skip_term", True), ("normalize_after", False),
                      ("project_skip", False), ("backend", "auto"), ("gemm", "auto"))
    # Whole modules pickled by the official package (same class path, sru.modules.SRUCell)
    # lack the attributes added here or in later 2.x versions.
    _PICKLE_DEFAULTS = (("normalize_after", False), ("weight_c_init", None),
                        ("amp_recurrence_fp16", False), ("custom_m", None),
                        ("project_skip", False))
    # Declared here: torch.jit.script warns on value-less annotations in __init__.
    weight_proj: Optional[nn.Parameter]
    weight: Optional[nn.Parameter]

    def __init__(self,
                 input_size: int,
                 hidden_size: int,
                 dropout: float = 0.0,
                 rnn_dropout: float = 0.0,
                 bidirectional: bool = False,
                 n_proj: int = 0,
                 use_tanh: bool = False,
                 highway_bias: float = 0.0,
                 has_skip_term: bool = True,
                 layer_norm: bool = False,
                 rescale: bool = True,
                 v1: bool = False,
                 custom_m: Optional[nn.Module] = None,
                 amp_recurrence_fp16: bool = False,
                 normalize_after: bool = False,
                 weight_c_init: Optional[float] = None,
                 backend: str = "auto",
                 project_skip: bool = False,
                 gemm: str = "auto"):
        super().__init__()
        check_options("SRUCell", dict(bidirectional=bidirectional, use_tanh=use_tanh,
                                      has_skip_term=has_skip_term, layer_norm=layer_norm,
                                      rescale=rescale, v1=v1, amp_recurrence_fp16=amp_recurrence_fp16,
                                      normalize_after=normalize_after, project_skip=project_skip),
                      dict(n_proj=n_proj), dict(highway_bias=highway_bias, weight_c_init=weight_c_init),
                      optional=("weight_c_init",), at_least_0=("weight_c_init",))
        check_module("SRUCell", "custom_m", custom_m)
        self._set_options(input_size, hidden_size, dropout, rnn_dropout, bidirectional, use_tanh,
                          has_skip_term=has_skip_term, highway_bias=highway_bias, v1=v1,
                          rescale=rescale, custom_m=custom_m,
                          amp_recurrence_fp16=amp_recurrence_fp16,
                          normalize_after=normalize_after, weight_c_init=weight_c_init,
                          backend=backend, gemm=gemm)

        # Like the official package: a projection that would not shrink anything is ignored.
        self.projection_size = 0
        if 0 < n_proj < input_size and n_proj < self.output_size:
            self.projection_size = n_proj

        # k = 4 adds the skip projection u3 when the input cannot be added to h directly, or when asked
        # (project_skip: the highway carries W_h x_t at every layer, as the paper's CNTK speech model).
        self.project_skip = bool(project_skip)
        self.num_matrices = 4 if has_skip_term and (project_skip or input_size != self.output_size) else 3

        if custom_m is None:
            in_features = self.projection_size or input_size
            self.weight_proj = (nn.Parameter(torch.empty(input_size, self.projection_size))
                                if self.projection_size else None)
            self.weight = nn.Parameter(
                torch.empty(in_features, self.output_size * self.num_matrices))
        else:
            self.register_parameter("weight_proj", None)
            self.register_parameter("weight", None)
        self.weight_c = nn.Parameter(torch.empty(2 * self.output_size))  # [v_f ; v_r]
        self.bias = nn.Parameter(torch.empty(2 * self.output_size))      # [b_f ; b_r]
        # The skip-term scale alpha; a buffer so that checkpoints carry it (official layout).
        self.register_buffer("scale_x", torch.ones(1, dtype=torch.float32))
        self._scale_x_value = 1.0  # Python copy of scale_x: no .item() sync in forward

        self.layer_norm = None  # type: Optional[nn.LayerNorm]  (annotated: torch.jit warns)
        if layer_norm:
            self.layer_norm = nn.LayerNorm(self.output_size if normalize_after else input_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The official initialization recipe (paper section 3.2): sru/initialization.py."""
        reset_cell_parameters(self)

    def forward(self,
                input: Tensor,
                c0: Optional[Tensor] = None,
                mask_pad: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        if torch.jit.is_scripting():  # a constant to TorchScript: it compiles only this line
            return self._scripted_forward(input, c0, mask_pad)  # (sru/scripting/cells.py)
        if tracing_loudly():  # torch.jit.trace: without the shape checks' TracerWarnings
            with quiet_tracer():
                return self.forward(input, c0, mask_pad)
        input, mask_pad, single_step = check_cell_input(self, input, c0, mask_pad)
        length, batch = input.size(0), input.size(1)
        if length == 0 or batch == 0:  # nothing to compute: empty h, c0 (or zeros) unchanged
            h, c = empty_outputs(input, c0, (batch, self.output_size), self.output_size,
                                 self.amp_recurrence_fp16, self)
            return (h.squeeze(0) if single_step else h), c
        route, plan = choose_route(self, input, c0)  # the one choice of route (sru/forward_routes.py)
        if route is Route.INFERENCE:  # no autograd: the matmul and one direct kernel call
            h, c = run_inference_path(plan, input, None if c0 is None else c0.unsqueeze(0), mask_pad)
            c = c[0]
        else:
            h, c = self.forward_layout(input, c0, PaddedLayout(batch, mask_pad), route)
        return (h.squeeze(0) if single_step else h), c

    def forward_layout(self, input: Tensor, c0: Optional[Tensor], layout,
                       route: Route = Route.GENERAL) -> Tuple[Tensor, Tensor]:
        """The layer's one body over a layout (sru/ops/packing.py): input (L, B, input_size) with a
        ``PaddedLayout`` (what ``forward`` passes), or packed rows (N, input_size) with a ``PackedLayout``
        (sru/packed.py); c0 (B, dirs*d), in the layout's sequence order. ``route``: ``FUSED``, ``EXPORT`` or
        ``GENERAL``, from ``choose_route``. Returns h in input's row layout and the last c (B, dirs*d)."""
        residual = input  # the skip term sees the raw input (before layer norm and rnn_dropout)
        if self.layer_norm is not None and not self.normalize_after:
            input = self.layer_norm(input)
        input, mask_c = self._dropout(input, layout)
        if route is Route.FUSED:  # eager CPU training, plain k = 3 layer: input is residual
            h, c = linear_recurrence(input, self.weight, self.weight_c, self.bias, c0, layout.masks(mask_c),
                                     self.recurrence_spec(), layout.kernel_args, gemm=self.gemm)
        else:
            U, V = self.compute_UV(input, c0, layout.mask_pad)
            h, c = self.apply_recurrence(U, V, residual, c0, mask_c, layout)
        if self.layer_norm is not None and self.normalize_after:
            h = self.layer_norm(h)
        # Half precision: h back in the input's dtype (the next layer's matmul runs in it); c
        # stays in the float32 the recurrence accumulated it in (sru.ops.precision.recurrence_dtype).
        return h.to(residual.dtype), c

    def compute_U(self, input: Tensor) -> Tensor:
        """One matrix product (two with a projection): (..., d_in) -> (..., dirs*d*k) ((L, B, .) padded,
        (N, .) packed), through the projection entry point (sru/ops/cpu/routes.py)."""
        x = input.reshape(-1, input.size(-1))  # a view when input is contiguous
        if self.weight_proj is not None:
            x = self.project(x, "weight_proj")
        return self.project(x).view(*input.shape[:-1], -1)

    def compute_UV(self, input: Tensor, c0: Optional[Tensor] = None,
                   mask_pad: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """U from the weight (or ``custom_m``), and the gate weights V.

        ``custom_m(input)`` returns U, or (U, V) with per-step gate weights V (L, B, dirs*d*2)
        laid out (dirs, d, 2). As in the official package, V is added to ``weight_c`` flat,
        element by element, although ``weight_c`` is laid out (2, dirs, d): checkpoints
        trained with a custom module depend on exactly this sum.
        """
        if self.custom_m is None:
            return self.compute_U(input), self.weight_c
        return custom_m_UV(self, input)

    def apply_recurrence(self, U: Tensor, V: Tensor, residual: Tensor, c0: Optional[Tensor],
                         mask_c: Optional[Tensor], layout) -> List[Tensor]:
        """The recurrence over ``layout`` (``PaddedLayout`` or ``PackedLayout``, sru/ops/packing.py)."""
        if not (self.has_skip_term and U.size(-1) == 3 * self.output_size):
            residual = None  # the skip input is u3 (k = 4) or absent: x is not read
        return list(self._recurrence(U, residual, V, c0, mask_c, layout))


class SRU(ScriptableStack, StackBase):
    """A stack of SRU layers, like ``nn.LSTM``.

    Input (L, B, input_size) ((B, L, input_size) with batch_first) or a PackedSequence;
    c0 (num_layers, B, dirs*hidden_size); mask_pad (L, B) ((B, L) with batch_first), nonzero =
    padded step. Returns h (L, B, dirs*hidden_size) (same layout/type as the input) and the
    last c per layer (num_layers, B, dirs*hidden_size), or (num_layers*dirs, B, hidden_size)
    with nn_rnn_compatible_return.
    """

    def __init__(self,
                 input_size: int,
                 hidden_size: int,
                 num_layers: int = 2,
                 dropout: float = 0.0,
                 rnn_dropout: float = 0.0,
                 bidirectional: bool = False,
                 projection_size: int = 0,
                 use_tanh: bool = False,
                 layer_norm: bool = False,
                 highway_bias: float = 0.0,
                 has_skip_term: bool = True,
                 rescale: bool = False,
                 v1: bool = False,
                 nn_rnn_compatible_return: bool = False,
                 custom_m: Optional[Union[nn.Module, List[nn.Module]]] = None,
                 proj_input_to_hidden_first: bool = False,
                 amp_recurrence_fp16: bool = False,
                 normalize_after: bool = False,
                 weight_c_init: Optional[float] = None,
                 batch_first: bool = False,
                 backend: str = "auto",
                 project_skip: bool = False,
                 gemm: str = "auto"):
        super().__init__()
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers <= 0:
            raise ValueError(f"SRU expected num_layers to be a positive int, got {num_layers!r}")
        check_layer_sizes("SRU", input_size, hidden_size, dropout, rnn_dropout)
        check_options("SRU", dict(bidirectional=bidirectional, use_tanh=use_tanh, layer_norm=layer_norm,
                                  has_skip_term=has_skip_term, rescale=rescale, v1=v1,
                                  nn_rnn_compatible_return=nn_rnn_compatible_return,
                                  proj_input_to_hidden_first=proj_input_to_hidden_first,
                                  amp_recurrence_fp16=amp_recurrence_fp16, normalize_after=normalize_after,
                                  batch_first=batch_first, project_skip=project_skip),
                      dict(projection_size=projection_size),
                      dict(highway_bias=highway_bias, weight_c_init=weight_c_init), optional=("weight_c_init",),
                      at_least_0=("weight_c_init",))
        check_module("SRU", "custom_m", custom_m, allow_list=True)
        if isinstance(custom_m, list) and len(custom_m) != num_layers:
            raise ValueError(f"SRU expected one custom_m per layer ({num_layers}), "
                             f"got a list of {len(custom_m)}")
        self._set_options(input_size, hidden_size, num_layers, bidirectional, dropout=dropout,
                          rnn_dropout=rnn_dropout, projection_size=projection_size,
                          use_layer_norm=layer_norm, has_skip_term=has_skip_term,
                          nn_rnn_compatible_return=nn_rnn_compatible_return,
                          amp_recurrence_fp16=amp_recurrence_fp16, batch_first=batch_first)

        # Optionally map the input to the hidden width first, so every layer has k = 3.
        self.input_to_hidden = None  # type: Optional[nn.Linear]  (see SRUCell.layer_norm)
        first_input_size = input_size
        if proj_input_to_hidden_first and input_size != self.output_size:
            self.input_to_hidden = nn.Linear(input_size, self.output_size, bias=False)
            first_input_size = self.output_size

        self.rnn_lst = nn.ModuleList()
        for i in range(num_layers):
            custom_m_i = None
            if custom_m is not None:
                custom_m_i = custom_m[i] if isinstance(custom_m, list) else copy.deepcopy(custom_m)
            self.rnn_lst.append(SRUCell(
                first_input_size if i == 0 else self.output_size,
                hidden_size,
                dropout=dropout if i + 1 != num_layers else 0.0,  # no dropout on the output
                rnn_dropout=rnn_dropout,
                bidirectional=bidirectional,
                n_proj=projection_size,
                use_tanh=use_tanh,
                highway_bias=highway_bias,
                has_skip_term=has_skip_term,
                layer_norm=layer_norm,
                rescale=rescale,
                v1=v1,
                custom_m=custom_m_i,
                amp_recurrence_fp16=amp_recurrence_fp16,
                normalize_after=normalize_after,
                weight_c_init=weight_c_init,
                backend=backend,
                project_skip=project_skip,
                gemm=gemm,
            ))

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_stack_plan", None)  # raw pointers: rebuilt on the first call after loading
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        # See SRUCell.__setstate__: official pickles predate these attributes.
        for name, default in (("batch_first", False), ("nn_rnn_compatible_return", False),
                              ("input_to_hidden", None)):
            if name not in self._modules:
                self.__dict__.setdefault(name, default)

    def reset_parameters(self) -> None:
        for cell in self.rnn_lst:
            cell.reset_parameters()
        if self.input_to_hidden is not None:
            self.input_to_hidden.reset_parameters()

    def forward(self,
                input: Union[Tensor, PackedSequence, PackedAsTuple],
                c0: Optional[Tensor] = None,
                mask_pad: Optional[Tensor] = None) -> Tuple[Union[Tensor, PackedSequence], Tensor]:
        if torch.jit.is_scripting():  # a constant to TorchScript: it compiles only this branch
            if not isinstance(input, Tensor):
                raise ValueError("SRU under torch.jit.script takes a padded tensor with "
                                 "mask_pad, not a PackedSequence")
            return self._scripted_forward(input, c0, mask_pad)  # (sru/scripting/cells.py)
        if tracing_loudly():  # torch.jit.trace: without the shape checks' TracerWarnings
            with quiet_tracer():
                return self.forward(input, c0, mask_pad)
        route, plan = choose_route(self, input, c0, mask_pad)  # the one choice of route (sru/forward_routes.py)
        if route is Route.STACK:  # a plain stack in inference: one C call
            out = run_stack(self, plan, input, c0, mask_pad)
            if out is not None:
                return out
            route, plan = choose_route(self, input, c0, mask_pad)  # no BLAS symbol: the plan is now unusable
        if route is Route.PACKED:  # no padded compute (sru/packed.py)
            return forward_packed_sequence(self, input, c0, mask_pad)
        time_major = not self.batch_first
        input, mask_pad = check_stack_input(self, input, c0, mask_pad, time_major)
        h = input if self.input_to_hidden is None else self.input_to_hidden(input)
        h, c_stack = self._layers(h, c0, mask_pad, plan if route is Route.INFERENCE else None)
        c_stack = self._stack_c(c_stack, h.size(1))
        return (h if time_major else h.transpose(0, 1)), c_stack

    def _layers(self, h: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor],
                inference: Optional[list]) -> Tuple[Tensor, Tensor]:
        """Every layer over time-major h (L, B, d_in): (h, c (layers, B, dirs*d)); ``inference``: the
        inference route's plan, or None (layer by layer, each layer choosing its route)."""
        batch = h.size(1)
        if h.size(0) == 0 or batch == 0:  # nothing to compute: empty h, c0 (or zeros) unchanged
            return empty_outputs(h, c0, (self.num_layers, batch, self.output_size),
                                 self.output_size, self.amp_recurrence_fp16, self)
        if inference is not None:  # no autograd: one matmul and one direct kernel call per layer
            return run_inference_path(inference, h, c0, mask_pad)
        c_last = []
        for i, cell in enumerate(self.rnn_lst):
            h, c = cell(h, None if c0 is None else c0[i], mask_pad=mask_pad)
            c_last.append(c)
        return h, torch.stack(c_last)

    def forward_varlen(self, tokens: Tensor, cu_seqlens: Tensor,
                       c0: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """Sequences stored one after another: tokens (N, input_size), sequence i = rows
        ``cu_seqlens[i]:cu_seqlens[i+1]``; c0 (num_layers, B, dirs*hidden_size). Returns h
        (N, dirs*hidden_size) in the same rows and the last c of each sequence, computed
        without padding (sru/packed.py, docs/sru.md#packed-input)."""
        return forward_varlen(self, tokens, cu_seqlens, c0)

    def extra_repr(self) -> str:
        return "batch_first=True" if self.batch_first else ""
