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
encoder, which would see the tokens it predicts. New encoders are one line of the ``ENCODERS`` table below.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Mapping

from torch import nn

from tasks.common.cnn_encoder import CNNEncoder
from tasks.common.rnn_encoders import LSTMEncoder, SRUEncoder
from tasks.engine.config_checks import as_plain, check_number

# The one table of encoders: ``model=<name>`` -> class. A new encoder is one line here.
ENCODERS: Dict[str, Callable[..., nn.Module]] = {
    "sru": SRUEncoder,
    "lstm": LSTMEncoder,
    "cnn": CNNEncoder,
}


def check_encoder_config(cfg: Mapping[str, Any], causal: bool = False) -> None:
    """Reject an encoder config before any data is loaded: unknown name or keys, bad ranges, and a
    bidirectional encoder for a causal task."""
    kwargs = dict(as_plain(cfg))
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
    kwargs = dict(as_plain(cfg))
    name = kwargs.pop("name")
    try:
        return ENCODERS[name](input_size=input_size, **kwargs)
    except TypeError as err:  # missing keys: say which config group to fix
        raise ValueError(f"model={name}: bad model config keys {sorted(kwargs)} ({err}). "
                         f"See conf/model/{name}.yaml for the accepted keys.") from None
