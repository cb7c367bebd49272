"""Sequence encoders shared by every task: one interface whatever the recurrent unit.

    enc = build_encoder(cfg.model, input_size)
    out, state = enc(x, state=None, mask_pad=None)     # x (L, B, D) -> out (L, B, enc.output_size)

``state`` is whatever the unit carries between calls (SRU: c of shape (layers, B, dirs*d); LSTM: the
(h, c) tuple). Tasks treat it as opaque: pass it back in, or ``detach_state`` it for truncated BPTT.
``mask_pad`` is (L, B) bool, true on padding (right padding: real tokens first).

Other encoders (e.g. a CNN for classification) register themselves with ``@register_encoder("name")``
in their own module; ``build_encoder`` then finds them by the config's ``name``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

import torch
from torch import Tensor, nn

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


def build_encoder(cfg: Mapping[str, Any], input_size: int) -> nn.Module:
    """Build the encoder named ``cfg["name"]`` with the other keys of ``cfg`` as keyword arguments."""
    kwargs = _as_dict(cfg)
    name = kwargs.pop("name", None)
    if name not in ENCODERS:
        raise ValueError(f"model.name: expected one of {sorted(ENCODERS)}, received {name!r}. "
                         f"Pick one with model=<name>.")
    cls = ENCODERS[name]
    try:
        return cls(input_size=input_size, **kwargs)
    except TypeError as err:  # unknown / missing keys: say which config group to fix
        raise ValueError(f"model={name}: bad model config keys {sorted(kwargs)} ({err}). "
                         f"See conf/model/{name}.yaml for the accepted keys.") from None


def detach_state(state: Any) -> Any:
    """Cut the graph at a truncated-BPTT boundary, keeping the values."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return state.detach()
    return type(state)(detach_state(s) for s in state)


def _check_input(x: Tensor, input_size: int, who: str) -> None:
    if x.dim() != 3 or x.size(-1) != input_size:
        raise ValueError(f"{who}: expected input of shape (L, B, {input_size}), received {tuple(x.shape)}")


@register_encoder("sru")
class SRUEncoder(nn.Module):
    """Stacked SRU from this repository's ``sru`` package."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, dropout: float = 0.0,
                 rnn_dropout: float = 0.0, bidirectional: bool = False, layer_norm: bool = False,
                 highway_bias: float = 0.0, rescale: bool = False, use_tanh: bool = False,
                 projection_size: int = 0, forget_bias: float = 0.0, **extra: Any):
        super().__init__()
        from sru import SRU  # imported here so LSTM-only runs work even while sru/ is being built
        self.input_size = input_size
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

    def forward(self, x: Tensor, state: Optional[Tensor] = None, mask_pad: Optional[Tensor] = None):
        _check_input(x, self.input_size, "SRU encoder")
        out, c = self.rnn(x, state, mask_pad=mask_pad)
        return out, c


@register_encoder("lstm")
class LSTMEncoder(nn.Module):
    """torch.nn.LSTM (cuDNN on GPU) behind the same interface; padding handled by packing."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, dropout: float = 0.0,
                 bidirectional: bool = False):
        super().__init__()
        self.input_size = input_size
        self.output_size = hidden_size * (2 if bidirectional else 1)
        self.rnn = nn.LSTM(input_size, hidden_size, num_layers=num_layers,
                           dropout=dropout if num_layers > 1 else 0.0, bidirectional=bidirectional)

    def forward(self, x: Tensor, state=None, mask_pad: Optional[Tensor] = None):
        _check_input(x, self.input_size, "LSTM encoder")
        if mask_pad is None:
            return self.rnn(x, state)
        # Packing makes the LSTM stop at each sequence's last real token (and the backward direction
        # start there), matching the SRU's padding semantics.
        lengths = (~mask_pad).sum(0).clamp_min(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, state = self.rnn(packed, state)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, total_length=x.size(0))
        return out, state
