"""Sequence encoders shared by every task: one interface whatever the unit (SRU, LSTM, CNN).

    check_encoder_config(cfg.model, causal=False)       # before data loading: name, keys, ranges
    enc = build_encoder(cfg.model, input_size, causal=False)
    out, state = enc(x, state=None, mask_pad=None)      # x (L, B, D) -> out (L, B, enc.output_size)
    outs, state = enc(x, return_all_layers=True)        # a list: every layer's output, top layer last
    h_t, state = enc.step(x_t, state)                   # one time step (B, D) -> (B, H), state carried
    state = enc.reorder_state(state, index)             # pick / repeat batch entries (beam search)

``mask_pad`` is (L, B) bool, true on padding (right padding: real tokens first); padded steps neither
change the state nor produce output (SRU: h = 0; LSTM: packed, outputs 0).

Final states (what ``state`` holds after a call, and what to pass back in):
- SRU: ``c`` of shape (layers, B, dirs*d); for a bidirectional layer [c_fwd at each sequence's last real
  step ; c_bwd at step 0] (docs/sru.md).
- LSTM: ``(h, c)``, each (layers*dirs, B, d), as torch.nn.LSTM: for each layer the forward direction
  then the backward one, the forward one at each sequence's last real step.
- CNN: None (no state).

Every encoder exposes ``input_size``, ``output_size``, ``num_layers`` and ``bidirectional``. A causal task
(language model, translation decoder) builds with ``causal=True`` and is refused a bidirectional
encoder, which would see the tokens it predicts. New encoders register with ``@register_encoder(name)``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional

import torch
from torch import Tensor, nn

from tasks.config_checks import check_number

ENCODERS: Dict[str, Callable[..., nn.Module]] = {}


def register_encoder(name: str):
    def wrap(cls):
        ENCODERS[name] = cls
        return cls
    return wrap


def _as_dict(cfg: Any) -> Dict[str, Any]:
    try:  # DictConfig -> plain dict, without making this module depend on OmegaConf being used
        from omegaconf import DictConfig, OmegaConf
        if isinstance(cfg, DictConfig):
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except ImportError:  # pragma: no cover
        pass
    return dict(cfg)


def check_encoder_config(cfg: Mapping[str, Any], causal: bool = False) -> None:
    """Reject an encoder config before any data is loaded: unknown name or keys, bad ranges, and a
    bidirectional encoder for a causal task."""
    kwargs = _as_dict(cfg)
    name = kwargs.pop("name", None)
    if name not in ENCODERS:
        raise ValueError(f"model.name: expected one of {sorted(ENCODERS)}, received {name!r}. "
                         f"Pick one with model=<name>.")
    params = inspect.signature(ENCODERS[name].__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            raise ValueError(f"model={name}: unknown model config keys {unknown}; "
                             f"see conf/model/{name}.yaml for the accepted keys")
    for key in ("hidden_size", "num_layers", "filters"):
        if key in kwargs:
            check_number(f"model.{key}", kwargs[key], 1, integer=True)
    for key in ("dropout", "rnn_dropout"):
        if key in kwargs:
            check_number(f"model.{key}", kwargs[key], 0.0, 1.0, high_open=True)
    if causal and kwargs.get("bidirectional"):
        raise ValueError("model.bidirectional=true: this task is causal (each position predicts what comes next), "
                         "and a bidirectional encoder would see the very tokens it predicts. "
                         "Set model.bidirectional=false.")


def build_encoder(cfg: Mapping[str, Any], input_size: int, causal: bool = False) -> nn.Module:
    """Build the encoder named ``cfg["name"]`` with the other keys of ``cfg`` as keyword arguments."""
    check_encoder_config(cfg, causal)
    kwargs = _as_dict(cfg)
    name = kwargs.pop("name")
    try:
        return ENCODERS[name](input_size=input_size, **kwargs)
    except TypeError as err:  # missing keys: say which config group to fix
        raise ValueError(f"model={name}: bad model config keys {sorted(kwargs)} ({err}). "
                         f"See conf/model/{name}.yaml for the accepted keys.") from None


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


@register_encoder("sru")
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


@register_encoder("lstm")
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


from tasks import cnn_encoder  # noqa: E402,F401  (registers "cnn": found whatever the task)
