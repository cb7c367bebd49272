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


def check_input(x: Tensor, input_size: int, who: str) -> None:
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
    """Stacked SRU from this repository's ``sru`` package. ``layer_args``: ``sru.SRU``'s own arguments
    (conf/model/sru.yaml; the schema reads them from SRU's signature), passed through as they are."""

    def __init__(self, input_size: int, forget_bias: float = 0.0, **layer_args: Any):
        super().__init__()
        from sru import SRU  # imported here so LSTM-only runs work even while sru/ is being built
        self.input_size = input_size
        self.rnn = SRU(input_size, **layer_args)
        self.num_layers, self.bidirectional = self.rnn.num_layers, bool(self.rnn.bidirectional)
        self.output_size = self.rnn.output_size
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
        check_input(x, self.input_size, "SRU encoder")
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


def reversal_index(lengths: Tensor, total_length: int) -> Tensor:
    """(L, B) time index that reverses each sequence's real part and leaves its padding in place:
    index[t, b] = n_b - 1 - t for t < n_b, else t. Applying it twice is the identity."""
    t = torch.arange(total_length, device=lengths.device).unsqueeze(1)
    n = lengths.to(t.device).unsqueeze(0)
    return torch.where(t < n, n - 1 - t, t)


def _gather_time(x: Tensor, index: Tensor) -> Tensor:
    return x.gather(0, index.unsqueeze(-1).expand_as(x))


class LSTMEncoder(_Recurrent):
    """torch.nn.LSTM (cuDNN on GPU), one module per layer so every layer's output is available;
    dropout between layers as nn.LSTM's ``dropout``.

    Padding (``mask_pad``), ``padding_mode`` (the fastest exact way on CPU is the default; measured by
    scripts/bench_lstm_padding.py, removed; see commit d067c11; docs/design_notes.md#lstm-padding-the-baseline):

    - "bucketed" (CPU default): the batch's sequences sorted by length into ``buckets`` groups, each cut
      to its longest sequence and run as "reverse"; outputs put back in batch order;
    - "reverse": each direction runs over the padded batch unpacked: the forward direction reads each
      sequence from its start, so padding after the end changes only padded outputs (set to 0); the
      backward direction runs the reverse weights over a copy of the batch in which each sequence's real
      part is reversed in place, then reverses its outputs back;
    - "packed" (CUDA default: cuDNN runs packed batches natively): pack_padded_sequence around each layer.

    All three give the same real outputs and gradients (tests/test_encoders.py). The final state of a
    padded batch is returned by "packed" only (None otherwise: nn.LSTM gives c only at the last padded
    step); no task reads it (the LM runs unpadded)."""

    padding_mode: Optional[str] = None  # None: "packed" on CUDA, else "bucketed"
    buckets: int = 4

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, dropout: float = 0.0,
                 bidirectional: bool = False, init: str = "torch"):
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
        if init == "keras":
            self.keras_init()
        elif init != "torch":
            raise ValueError(f"LSTMEncoder init: expected 'torch' or 'keras', received {init!r}")

    @torch.no_grad()
    def keras_init(self) -> None:
        """Glorot-uniform input weights, orthogonal recurrent weights (per gate), forget-gate bias 1: with
        nn.LSTM's own init a stack of 5 layers x 128 shrinks unit-variance input to std ~0.04 by layer 3 and
        does not leave CTC's blank phase (docs/design_notes.md#lstm-initialisation); with this one every layer's
        output keeps std ~0.11-0.17 (scripts/lstm_init_signal.py, removed; see commit 65b355b)."""
        h = self.layers[0].hidden_size
        for layer in self.layers:
            for suffix in ("", "_reverse") if self.bidirectional else ("",):
                nn.init.xavier_uniform_(getattr(layer, f"weight_ih_l0{suffix}"))
                recurrent = getattr(layer, f"weight_hh_l0{suffix}")
                for gate in range(4):  # gates i, f, g, o
                    nn.init.orthogonal_(recurrent[gate * h:(gate + 1) * h])
                bias_ih, bias_hh = getattr(layer, f"bias_ih_l0{suffix}"), getattr(layer, f"bias_hh_l0{suffix}")
                bias_ih.zero_()
                bias_hh.zero_()
                bias_ih[h:2 * h].fill_(1.0)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # checkpoints of the earlier single nn.LSTM ("rnn.weight_ih_l1_reverse") map onto per-layer modules
        for key in [k for k in state_dict if k.startswith(prefix + "rnn.")]:
            name = key[len(prefix) + 4:]                       # weight_ih_l1_reverse
            base, _, rest = name.partition("_l")               # weight_ih, 1_reverse
            layer, _, suffix = rest.partition("_")
            state_dict[f"{prefix}layers.{layer}.{base}_l0{'_' + suffix if suffix else ''}"] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: Tensor, state=None, mask_pad: Optional[Tensor] = None, return_all_layers: bool = False):
        check_input(x, self.input_size, "LSTM encoder")
        mode = self.padding_mode or ("packed" if x.is_cuda else "bucketed")
        if mode not in ("bucketed", "reverse", "packed"):
            raise ValueError(f"LSTMEncoder.padding_mode: expected 'bucketed', 'reverse' or 'packed', received {mode!r}")
        padded = mask_pad is not None and bool(mask_pad.any())
        if padded and mode == "bucketed":
            outs = self._bucketed(x, state, mask_pad.bool())
            return (outs if return_all_layers else outs[-1]), None
        outs, final = self._layers(x, state, mask_pad.bool() if padded else None, mode)
        return (outs if return_all_layers else outs[-1]), final

    def _bucketed(self, x: Tensor, state, mask_pad: Tensor) -> List[Tensor]:
        lengths = (~mask_pad).sum(0).clamp_min(1)
        order = lengths.argsort(descending=True)
        outs = [x.new_zeros(x.size(0), x.size(1), self.output_size) for _ in self.layers]
        for part in order.chunk(self.buckets):
            n = int(lengths[part].max())
            sub_state = None if state is None else tuple(s[:, part] for s in state)
            sub_mask = mask_pad[:n, part]
            sub_outs, _ = self._layers(x[:n, part], sub_state, sub_mask if sub_mask.any() else None, "reverse")
            outs = [o.index_copy(1, part, nn.functional.pad(so, (0, 0, 0, 0, 0, x.size(0) - n)))
                    for o, so in zip(outs, sub_outs)]
        return outs

    def _layers(self, x: Tensor, state, mask_pad: Optional[Tensor], mode: str):
        """Every layer over x; mask_pad None (no padding) or (L, B) bool. Returns (outputs, final state)."""
        dirs = 2 if self.bidirectional else 1
        lengths = None if mask_pad is None else (~mask_pad).sum(0).clamp_min(1)
        if mask_pad is not None and mode == "reverse":
            keep = (~mask_pad).unsqueeze(-1).to(x.dtype)
            index = reversal_index(lengths, x.size(0)) if self.bidirectional else None
        outs: List[Tensor] = []
        hs, cs = [], []
        h = x
        for i, layer in enumerate(self.layers):
            if i > 0:
                h = self.dropout(h)
            layer_state = None if state is None else tuple(s[i * dirs:(i + 1) * dirs].contiguous() for s in state)
            if mask_pad is None:
                h, (h_n, c_n) = layer(h, layer_state)
                hs.append(h_n)
                cs.append(c_n)
            elif mode == "packed":  # each sequence stops at its last real token
                packed = nn.utils.rnn.pack_padded_sequence(h, lengths.cpu(), enforce_sorted=False)
                h, (h_n, c_n) = layer(packed, layer_state)
                h, _ = nn.utils.rnn.pad_packed_sequence(h, total_length=x.size(0))
                hs.append(h_n)
                cs.append(c_n)
            else:
                h = self._reverse_padded_layer(layer, h, layer_state, index) * keep
            outs.append(h)
        return outs, ((torch.cat(hs), torch.cat(cs)) if hs else None)

    @staticmethod
    def _reverse_padded_layer(layer: nn.LSTM, x: Tensor, state, index: Optional[Tensor]) -> Tensor:
        """One (bi)directional layer over a right-padded batch, unpacked (see the class docstring)."""
        def direction(inp: Tensor, suffix: str, d: int) -> Tensor:
            weights = [getattr(layer, f"{n}_l0{suffix}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            if state is None:
                zeros = inp.new_zeros(1, inp.size(1), layer.hidden_size)
                hx = (zeros, zeros)
            else:
                hx = (state[0][d:d + 1], state[1][d:d + 1])
            return torch.lstm(inp, hx, weights, True, 1, 0.0, layer.training, False, False)[0]

        forward = direction(x, "", 0)
        if index is None:
            return forward
        backward = _gather_time(direction(_gather_time(x, index), "_reverse", 1), index)
        return torch.cat([forward, backward], dim=-1)
