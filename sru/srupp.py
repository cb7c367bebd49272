"""SRU++: SRU layers whose U comes from an attention block (``sru.srupp_attention``).

``SRUpp`` and ``SRUppCell`` take the constructor arguments and defaults of the official
``sru==3.0.0.dev6`` package and produce the same state_dict keys and shapes
(``rnn_lst.{i}.weight_c``, ``bias``, ``scale_x``, ``transform_module.*``, ``layer_norm.*``,
``input_to_hidden.weight``), so its checkpoints load with ``strict=True`` and compute the same
function (tests/test_srupp_official.py). The recurrence is ``sru.ops.elementwise_recurrence``:
the fused CPU kernel, the Triton kernel on CUDA, or the reference loop, with autograd and
torch.compile. Token-by-token decoding with a key/value cache: ``sru.srupp_decode``.
See docs/srupp.md.
"""
import math
from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from sru.checks import (check_float_tensor, check_input_dtype, check_layer_sizes, check_mask_pad, check_module,
                        check_options, empty_outputs)
from sru.cell_base import RecurrentCellBase, StackBase
from sru.linear import DispatchedLinear
from sru.ops.packing import PaddedLayout
from sru.srupp_attention import SRUppAttention, SRUppProjectedLinear
from sru.srupp_decoding import one_call
from sru.srupp_decode import SRUppCache, cache_from_memory, decode
from sru.scripting.cells import PackedAsTuple, ScriptableCell
from sru.scripting.srupp import ScriptableSRUppCell, ScriptableSRUppStack

_SRUPP_TRANSFORMS = (SRUppAttention, SRUppProjectedLinear)


class SRUppCell(ScriptableSRUppCell, ScriptableCell, RecurrentCellBase):
    """One SRU++ layer: U = transform_module(x) (attention or projected linear), then the SRU
    recurrence. Arguments as the official 3.0 ``SRUCell`` (which ``SRUppCell`` subclasses
    there); ``backend`` picks the recurrence kernel as in ``sru.SRUCell``.

    ``transform_module=None`` builds the official plain layout (an ``nn.Linear``, or two with
    ``projection_size``); such a layer has no attention and ignores attention arguments.
    """

    _REPR_DEFAULTS = (("dropout", 0.0), ("bidirectional", False), ("highway_bias", 0.0),
                      ("rescale", False), ("normalize_after", True), ("backend", "auto"),
                      ("gemm", "auto"))

    def __init__(self,
                 input_size: int,
                 hidden_size: int,
                 dropout: float = 0.0,
                 rnn_dropout: float = 0.0,
                 bidirectional: bool = False,
                 projection_size: int = 0,
                 highway_bias: float = 0.0,
                 layer_norm: bool = False,
                 normalize_after: bool = True,
                 transform_module: Optional[nn.Module] = None,
                 rescale: bool = False,
                 has_skip_term: bool = True,
                 use_tanh: bool = False,
                 v1: bool = False,
                 amp_recurrence_fp16: bool = False,
                 weight_c_init: float = 1.0,
                 backend: str = "auto",
                 gemm: str = "auto"):
        super().__init__()
        check_options("SRUppCell", dict(bidirectional=bidirectional, layer_norm=layer_norm,
                                        normalize_after=normalize_after, rescale=rescale,
                                        has_skip_term=has_skip_term, use_tanh=use_tanh, v1=v1,
                                        amp_recurrence_fp16=amp_recurrence_fp16),
                      dict(projection_size=projection_size),
                      dict(highway_bias=highway_bias, weight_c_init=weight_c_init))
        check_module("SRUppCell", "transform_module", transform_module)
        self._set_options(input_size, hidden_size, dropout, rnn_dropout, bidirectional, use_tanh,
                          projection_size=projection_size, highway_bias=highway_bias,
                          normalize_after=normalize_after, rescale=rescale,
                          has_skip_term=has_skip_term, v1=v1,
                          amp_recurrence_fp16=amp_recurrence_fp16, weight_c_init=weight_c_init,
                          backend=backend, gemm=gemm)
        # k = 4: the skip input is a fourth slice of U when x cannot be added to h directly.
        self.num_matrices = 4 if has_skip_term and input_size != self.output_size else 3

        if transform_module is None:
            width = self.output_size * self.num_matrices
            transform_module = (DispatchedLinear(input_size, width, bias=False) if projection_size == 0
                                else nn.Sequential(DispatchedLinear(input_size, projection_size, bias=False),
                                                   DispatchedLinear(projection_size, width, bias=False)))
        self.transform_module = transform_module
        self.gemm = gemm  # again, now that the transform's dispatched Linear layers exist
        self.weight_c = nn.Parameter(torch.empty(2 * self.output_size))  # [v_f ; v_r]
        self.bias = nn.Parameter(torch.empty(2 * self.output_size))      # [b_f ; b_r]
        self.register_buffer("scale_x", torch.zeros(1))
        self._scale_x_value = 1.0  # Python copy of scale_x: nothing to sync in forward
        self.layer_norm = None  # type: Optional[nn.LayerNorm]  (annotated: torch.jit warns)
        if layer_norm:
            self.layer_norm = nn.LayerNorm(self.output_size if normalize_after else input_size)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The official 3.0 initialization: highway bias, alpha, transform, weight_c."""
        self.bias.zero_()
        self.bias[self.output_size:] = self.highway_bias
        alpha = math.sqrt(1 + 2 * math.exp(self.highway_bias))
        self.set_scale_x(alpha if self.rescale and self.has_skip_term else 1.0)
        _reset_transform(self.transform_module)
        if self.v1:  # the paper's first version: no c_{t-1} term in the gates
            self.weight_c.zero_()
            self.weight_c.requires_grad_(False)
        else:
            self.weight_c.uniform_(-self.weight_c_init, self.weight_c_init)

    def forward(self,
                input: Tensor,
                c0: Optional[Tensor] = None,
                mask_pad: Optional[Tensor] = None,
                attn_mask: Optional[Tensor] = None,
                memory: Optional[Tensor] = None,
                memory_mask_pad: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """input (L, B, input_size); c0 (B, dirs*hidden_size); mask_pad (L, B), nonzero =
        padded; attention arguments as ``SRUppAttention.forward``. Returns h (L, B,
        dirs*hidden_size) and the last c (B, dirs*hidden_size)."""
        if torch.jit.is_scripting():  # a constant to TorchScript (sru/scripting/srupp.py)
            return self._scripted_forward(input, c0, mask_pad, attn_mask, memory,
                                          memory_mask_pad)
        self._check(input, c0, mask_pad)
        batch = input.size(1)
        if input.size(0) == 0 or batch == 0:  # nothing to compute, as SRUCell: empty h, c0 (or zeros)
            return empty_outputs(input, c0, (batch, self.output_size), self.output_size,
                                 self.amp_recurrence_fp16, self)
        residual = input  # the skip term sees the raw input
        if self.layer_norm is not None and not self.normalize_after:
            input = self.layer_norm(input)
        input, mask_c = self._dropout(input, PaddedLayout(batch))
        U = self.compute_U(input, mask_pad, attn_mask, memory, memory_mask_pad)
        h, c = self.apply_recurrence(U, residual, c0, mask_c, mask_pad)
        if self.layer_norm is not None and self.normalize_after:
            h = self.layer_norm(h)
        return h.to(residual.dtype), c

    def compute_U(self, input: Tensor, mask_pad: Optional[Tensor] = None,
                  attn_mask: Optional[Tensor] = None, memory: Optional[Tensor] = None,
                  memory_mask_pad: Optional[Tensor] = None) -> Tensor:
        if isinstance(self.transform_module, _SRUPP_TRANSFORMS):
            U = self.transform_module(input, mask_pad=mask_pad, attn_mask=attn_mask,
                                      memory=memory, memory_mask_pad=memory_mask_pad)
        else:
            U = self.transform_module(input)
        width = self.output_size * self.num_matrices
        if not isinstance(U, Tensor) or U.shape[:2] != input.shape[:2] or U.size(-1) != width:
            raise ValueError(f"SRUppCell expected transform_module to return U of shape "
                             f"(length, batch, {width}) (dirs*hidden_size*{self.num_matrices}), "
                             f"got {tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__}")
        return U

    def apply_recurrence(self, U: Tensor, residual: Tensor, c0: Optional[Tensor],
                         mask_c: Optional[Tensor], mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        x = residual if self.has_skip_term and self.num_matrices == 3 else None
        return self._recurrence(U, x, self.weight_c, c0, mask_c, PaddedLayout(U.size(1), mask_pad))

    def _check(self, input, c0, mask_pad) -> None:
        check_float_tensor("input", "SRUppCell", input)
        check_input_dtype("SRUppCell", input, self.weight_c.dtype)
        if input.dim() != 3 or input.size(-1) != self.input_size:
            raise ValueError(f"SRUppCell expected input of shape (length, batch, "
                             f"{self.input_size}), got {tuple(input.shape)}")
        if c0 is not None:
            check_float_tensor("c0", "SRUppCell", c0)
            if tuple(c0.shape) != (input.size(1), self.output_size):
                raise ValueError(f"SRUppCell expected c0 of shape (batch, directions*hidden_size) "
                                 f"= {(input.size(1), self.output_size)}, got {tuple(c0.shape)}")
        if mask_pad is not None:
            check_mask_pad("SRUppCell", mask_pad, tuple(input.shape[:2]), "(length, batch)")


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_stack_arguments(proj_size, num_layers, num_heads, dropout, attn_dropout,
                           attention_every_n_layers, attention_last_n_layers) -> None:
    """SRUpp's constructor arguments, refused here with one ValueError naming the fix, instead
    of a ZeroDivisionError or a shape error deep inside the first forward."""
    if not _positive_int(num_layers):
        raise ValueError(f"SRUpp expected num_layers to be a positive int, got {num_layers!r}")
    if not _positive_int(proj_size):
        raise ValueError(f"SRUpp expected proj_size (the attention's projected width) to be a "
                         f"positive int, got {proj_size!r}; pass e.g. proj_size=hidden_size // 4")
    if not _positive_int(num_heads) or proj_size % num_heads != 0:
        raise ValueError(f"SRUpp expected num_heads to be a positive int dividing "
                         f"proj_size={proj_size}, got num_heads={num_heads!r}")
    for name, value in (("dropout", dropout), ("attn_dropout", attn_dropout)):
        if not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
            raise ValueError(f"SRUpp expected {name} in [0, 1), got {value!r}")
    if not _positive_int(attention_every_n_layers):
        raise ValueError(f"SRUpp expected attention_every_n_layers >= 1 (1 = attention in every "
                         f"layer), got {attention_every_n_layers!r}")
    last = attention_last_n_layers
    if not isinstance(last, int) or isinstance(last, bool) or not (last == -1 or 0 <= last <= num_layers):
        raise ValueError(f"SRUpp expected attention_last_n_layers in [0, num_layers={num_layers}] "
                         f"or -1 (unset), got {last!r}")


def _reset_transform(module: nn.Module) -> None:
    """As the official package: xavier for plain linears (also inside a Sequential), else the
    module's own reset_parameters."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
    elif isinstance(module, nn.Sequential):
        for child in module:
            _reset_transform(child)
    elif hasattr(module, "reset_parameters"):
        module.reset_parameters()


class SRUpp(ScriptableSRUppStack, StackBase):
    """A stack of SRU++ layers (``rnn_lst``), like the official ``sru.SRUpp``.

    forward(input (L, B, input_size) or PackedSequence, c0 (layers, B, dirs*hidden_size),
    mask_pad (L, B), attn_mask (L, M+L) additive float, memory [per layer (M, B, in_i) or
    None], memory_mask_pad (M, B)) -> (h, c, {"saved_inputs": [each layer's input]}).
    ``saved_inputs`` of one segment is the ``memory`` of the next (Transformer-XL style).
    """

    def __init__(self,
                 input_size: int,
                 hidden_size: int,
                 proj_size: int,
                 num_layers: int = 2,
                 dropout: float = 0.0,
                 attn_dropout: float = 0.0,
                 num_heads: int = 1,
                 bidirectional: bool = False,
                 layer_norm: bool = False,
                 normalize_after: bool = False,
                 attn_layer_norm: bool = True,
                 highway_bias: float = -2.0,
                 attention_every_n_layers: int = 1,
                 attention_last_n_layers: int = -1,
                 rescale: bool = False,
                 nn_rnn_compatible_return: bool = False,
                 proj_input_to_hidden_first: bool = False,
                 weight_c_init: float = 1.0,
                 backend: str = "auto",
                 gemm: str = "auto"):
        super().__init__()
        check_layer_sizes("SRUpp", input_size, hidden_size, dropout, 0.0)
        _check_stack_arguments(proj_size, num_layers, num_heads, dropout, attn_dropout,
                               attention_every_n_layers, attention_last_n_layers)
        check_options("SRUpp", dict(bidirectional=bidirectional, layer_norm=layer_norm,
                                    normalize_after=normalize_after, attn_layer_norm=attn_layer_norm,
                                    rescale=rescale, nn_rnn_compatible_return=nn_rnn_compatible_return,
                                    proj_input_to_hidden_first=proj_input_to_hidden_first),
                      None, dict(highway_bias=highway_bias, weight_c_init=weight_c_init))
        if attention_every_n_layers != 1 and attention_last_n_layers != -1:
            raise ValueError("SRUpp expected at most one of attention_every_n_layers (got "
                             f"{attention_every_n_layers}) and attention_last_n_layers (got "
                             f"{attention_last_n_layers}) to be set; leave the other at its default")
        self._set_options(input_size, hidden_size, num_layers, bidirectional, proj_size=proj_size,
                          num_heads=num_heads, dropout=dropout, use_layer_norm=layer_norm,
                          nn_rnn_compatible_return=nn_rnn_compatible_return)
        self.rnn_lst = nn.ModuleList()  # registered before input_to_hidden: the official key order
        self.input_to_hidden = None  # type: Optional[nn.Linear]  (see SRUppCell.layer_norm)
        first_input = input_size
        if proj_input_to_hidden_first and input_size != self.output_size:
            first_input = self.output_size
            self.input_to_hidden = nn.Linear(input_size, self.output_size, bias=False)
            nn.init.xavier_uniform_(self.input_to_hidden.weight)

        for i in range(num_layers):
            if attention_last_n_layers != -1:
                has_attention = num_layers - i <= attention_last_n_layers
            else:
                has_attention = (i + 1) % attention_every_n_layers == 0
            in_features = first_input if i == 0 else self.output_size
            out_features = self.output_size * (3 if in_features == self.output_size else 4)
            if has_attention:
                transform = SRUppAttention(in_features, out_features, proj_size, dropout=dropout,
                                           attn_dropout=attn_dropout, num_heads=num_heads,
                                           layer_norm=attn_layer_norm)
            else:
                transform = SRUppProjectedLinear(in_features, out_features, proj_size,
                                                 dropout=dropout, layer_norm=attn_layer_norm)
            self.rnn_lst.append(SRUppCell(
                in_features, hidden_size, dropout=dropout if i + 1 != num_layers else 0.0,
                bidirectional=bidirectional, layer_norm=layer_norm,
                normalize_after=normalize_after, highway_bias=highway_bias, rescale=rescale,
                transform_module=transform, weight_c_init=weight_c_init, backend=backend,
                gemm=gemm))

    def __getitem__(self, n: int) -> SRUppCell:
        return self.rnn_lst[n]

    def reset_parameters(self) -> None:
        for cell in self.rnn_lst:
            cell.reset_parameters()
        if self.input_to_hidden is not None:
            nn.init.xavier_uniform_(self.input_to_hidden.weight)

    def forward(self,
                input: Union[Tensor, PackedSequence, PackedAsTuple],
                c0: Optional[Tensor] = None,
                mask_pad: Optional[Tensor] = None,
                attn_mask: Optional[Tensor] = None,
                memory: Optional[List[Optional[Tensor]]] = None,
                memory_mask_pad: Optional[Tensor] = None,
                ) -> Tuple[Union[Tensor, PackedSequence], Tensor, Dict[str, List[Tensor]]]:
        if torch.jit.is_scripting():  # a constant to TorchScript (sru/scripting/srupp.py)
            if not isinstance(input, Tensor):
                raise ValueError("SRUpp under torch.jit.script takes a padded tensor with "
                                 "mask_pad, not a PackedSequence")
            return self._scripted_forward(input, c0, mask_pad, attn_mask, memory,
                                          memory_mask_pad)
        lengths = None
        if isinstance(input, PackedSequence):
            if mask_pad is not None:
                raise ValueError("SRUpp expected mask_pad=None with a PackedSequence input "
                                 "(its lengths already define the padding)")
            input, lengths = pad_packed_sequence(input)
            mask_pad = (torch.arange(input.size(0)).unsqueeze(1) >= lengths.unsqueeze(0)).to(input.device)
        self._check(input, c0, mask_pad, memory)
        batch = input.size(1)
        x = input if self.input_to_hidden is None else self.input_to_hidden(input)
        x = x.contiguous()
        saved_inputs, c_last = [], []
        for i, cell in enumerate(self.rnn_lst):
            saved_inputs.append(x)
            x, c = cell(x, None if c0 is None else c0[i], mask_pad=mask_pad, attn_mask=attn_mask,
                        memory=None if memory is None else memory[i],
                        memory_mask_pad=memory_mask_pad)
            c_last.append(c)
        c_stack = self._stack_c(c_last, batch)
        h = x if lengths is None else pack_padded_sequence(x, lengths, enforce_sorted=False)
        return h, c_stack, {"saved_inputs": saved_inputs}

    def decode(self, input: Tensor, cache: Optional[SRUppCache] = None,
               max_context: Optional[int] = None) -> Tuple[Tensor, SRUppCache]:
        """Incremental causal decoding (no grad, eval mode): h of ``input`` (L, B, in) or
        (B, in) after the positions in ``cache``, and the new cache. See sru.srupp_decode."""
        return decode(self, input, cache, max_context)

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop(one_call.PLAN, None)  # raw pointers: rebuilt on the first decoding step after loading
        return state

    def cache_from_memory(self, saved_inputs: List[Tensor], c: Tensor) -> SRUppCache:
        """A decoding cache that continues after a forward that returned c and saved_inputs."""
        return cache_from_memory(self, saved_inputs, c)

    def _check(self, input, c0, mask_pad, memory) -> None:
        check_float_tensor("input", "SRUpp", input)
        check_input_dtype("SRUpp", input, self.rnn_lst[0].weight_c.dtype)
        if input.dim() != 3 or input.size(-1) != self.input_size:
            raise ValueError(f"SRUpp expected input of shape (length, batch, {self.input_size}), "
                             f"got {tuple(input.shape)}")
        if c0 is not None:
            expected = (self.num_layers, input.size(1), self.output_size)
            if not isinstance(c0, Tensor) or tuple(c0.shape) != expected:
                raise ValueError(f"SRUpp expected c0 of shape (num_layers, batch, "
                                 f"directions*hidden_size) = {expected}, got "
                                 f"{tuple(c0.shape) if isinstance(c0, Tensor) else type(c0).__name__}")
        if mask_pad is not None:
            check_mask_pad("SRUpp", mask_pad, tuple(input.shape[:2]), "(length, batch)")
        if memory is not None and (not isinstance(memory, (list, tuple))
                                   or len(memory) != self.num_layers):
            raise ValueError(f"SRUpp expected memory to be a list of {self.num_layers} tensors "
                             "or None (one per layer: that layer's saved input from the previous "
                             f"segment), got {type(memory).__name__}"
                             f"{' of length ' + str(len(memory)) if isinstance(memory, (list, tuple)) else ''}")

    def extra_repr(self) -> str:
        return f"proj_size={self.proj_size}, num_heads={self.num_heads}"
