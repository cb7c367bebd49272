"""The recurrent encoders: a stacked SRU (this repository's ``sru``) and ``torch.nn.LSTM``, with the
state helpers every recurrent encoder shares (truncated-BPTT detaching, beam reordering, one step).
Their config keys are checked and their names looked up in ``tasks/common/encoders.py``."""
from __future__ import annotations

from typing import Any, List, Optional

import torch
from torch import Tensor, nn


def detach_state(state: Any) -> Any:
    """Cut the graph at a truncated-BPTT boundary, keeping the values."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return state.detach()
    return type(state)(detach_state(s) for s in state)


def reorder_state(state: Any, index: Tensor) -> Any:
    """Select batch entries ``index`` (dim 1 of every state tensor), e.g. the surviving beams."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return state.index_select(1, index.to(state.device))
    return type(state)(reorder_state(s, index) for s in state)


def _check_input(x: Tensor, input_size: int, who: str) -> None:
    if x.dim() != 3 or x.size(-1) != input_size:
        raise ValueError(f"{who}: expected input of shape (L, B, {input_size}), received {tuple(x.shape)}")


class _Recurrent(nn.Module):
    """What the SRU and LSTM encoders share: one-step decoding and state reordering."""

    bidirectional: bool = False

    def step(self, x_t: Tensor, state: Any = None):
        """One time step: x_t (B, D) -> (h_t (B, output_size), new state). Unidirectional encoders only."""
        if self.bidirectional:
            raise ValueError("step(): a bidirectional encoder cannot run one step at a time "
                             "(its backward direction needs the whole sequence); set model.bidirectional=false")
        out, state = self(x_t.unsqueeze(0), state)
        return out[0], state

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        return reorder_state(state, index)


class SRUEncoder(_Recurrent):
    """Stacked SRU from this repository's ``sru`` package."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, dropout: float = 0.0,
                 rnn_dropout: float = 0.0, bidirectional: bool = False, layer_norm: bool = False,
                 highway_bias: float = 0.0, rescale: bool = False, use_tanh: bool = False,
                 projection_size: int = 0, forget_bias: float = 0.0, **extra: Any):
        super().__init__()
        from sru import SRU  # imported here so LSTM-only runs work even while sru/ is being built
        self.input_size = input_size
        self.num_layers = num_layers
        self.bidirectional = bool(bidirectional)
        self.output_size = hidden_size * (2 if bidirectional else 1)
        self.rnn = SRU(input_size, hidden_size, num_layers=num_layers, dropout=dropout,
                       rnn_dropout=rnn_dropout, bidirectional=bidirectional, layer_norm=layer_norm,
                       highway_bias=highway_bias, rescale=rescale, use_tanh=use_tanh,
                       projection_size=projection_size, **extra)
        # forget_bias: initial b_f of every layer (a departure from the official init, b_f = 0, kept as
        # the default). Each layer's `bias` is [b_f ; b_r], each dirs*hidden_size long; only the b_f half
        # changes, at init only, so `sru/` and its checkpoint layout stay the official ones. A positive
        # b_f keeps more of c_{t-1}: the last state then summarises more than the last few words.
        self.forget_bias = float(forget_bias)
        if self.forget_bias != 0.0:
            with torch.no_grad():
                for cell in self.rnn.rnn_lst:
                    cell.bias[:cell.bias.numel() // 2].fill_(self.forget_bias)

    def forward(self, x: Tensor, state: Optional[Tensor] = None, mask_pad: Optional[Tensor] = None,
                return_all_layers: bool = False):
        _check_input(x, self.input_size, "SRU encoder")
        if not return_all_layers:
            return self.rnn(x, state, mask_pad=mask_pad)
        # the layer loop of sru.SRU.forward, keeping every layer's output (DrQA concatenates them)
        h = x if self.rnn.input_to_hidden is None else self.rnn.input_to_hidden(x)
        outs: List[Tensor] = []
        last: List[Tensor] = []
        for i, cell in enumerate(self.rnn.rnn_lst):
            h, c = cell(h, None if state is None else state[i], mask_pad=mask_pad)
            outs.append(h)
            last.append(c)
        return outs, torch.stack(last)


class LSTMEncoder(_Recurrent):
    """torch.nn.LSTM (cuDNN on GPU), one module per layer so every layer's output is available;
    padding handled by packing; dropout between layers as nn.LSTM's ``dropout``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, dropout: float = 0.0,
                 bidirectional: bool = False):
        super().__init__()
        self.input_size = input_size
        self.num_layers = num_layers
        self.bidirectional = bool(bidirectional)
        dirs = 2 if bidirectional else 1
        self.output_size = hidden_size * dirs
        self.dropout = nn.Dropout(dropout if num_layers > 1 else 0.0)
        self.layers = nn.ModuleList(
            nn.LSTM(input_size if i == 0 else self.output_size, hidden_size, bidirectional=bidirectional)
            for i in range(num_layers))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # checkpoints of the earlier single nn.LSTM ("rnn.weight_ih_l1_reverse") map onto per-layer modules
        for key in [k for k in state_dict if k.startswith(prefix + "rnn.")]:
            name = key[len(prefix) + 4:]                       # weight_ih_l1_reverse
            base, _, rest = name.partition("_l")               # weight_ih, 1_reverse
            layer, _, suffix = rest.partition("_")
            state_dict[f"{prefix}layers.{layer}.{base}_l0{'_' + suffix if suffix else ''}"] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: Tensor, state=None, mask_pad: Optional[Tensor] = None, return_all_layers: bool = False):
        _check_input(x, self.input_size, "LSTM encoder")
        dirs = 2 if self.bidirectional else 1
        lengths = None if mask_pad is None else (~mask_pad).sum(0).clamp_min(1).cpu()
        outs: List[Tensor] = []
        hs, cs = [], []
        h = x
        for i, layer in enumerate(self.layers):
            if i > 0:
                h = self.dropout(h)
            layer_state = None if state is None else tuple(s[i * dirs:(i + 1) * dirs].contiguous() for s in state)
            if lengths is None:
                h, (h_n, c_n) = layer(h, layer_state)
            else:  # packing stops each sequence at its last real token (the backward direction starts there)
                packed = nn.utils.rnn.pack_padded_sequence(h, lengths, enforce_sorted=False)
                h, (h_n, c_n) = layer(packed, layer_state)
                h, _ = nn.utils.rnn.pad_packed_sequence(h, total_length=x.size(0))
            outs.append(h)
            hs.append(h_n)
            cs.append(c_n)
        final = (torch.cat(hs), torch.cat(cs))
        return (outs if return_all_layers else h), final
