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
from typing import Any, Callable, Dict, List, Mapping

from torch import nn

from sru import SRU, SRUpp
from tasks.common.cnn_encoder import CNNEncoder
from tasks.common.model_schemas import (CNNConfig, LSTMConfig, SRUConfig, SRUppConfig, TransformerLMConfig,
                                        CROSS_KEY_CHECKS)
from tasks.common.rnn_encoders import LSTMEncoder, SRUEncoder
from tasks.common.srupp_encoder import SRUppEncoder
from tasks.common.transformer_lm_encoder import TransformerLMEncoder
from tasks.engine.errors import ConfigError
from tasks.engine.config.schema import as_plain, typed

# The one table of encoders: ``model=<name>`` -> class, and the schema of its config group. A new
# encoder is one line in each.
ENCODERS: Dict[str, Callable[..., nn.Module]] = {
    "sru": SRUEncoder,
    "lstm": LSTMEncoder,
    "cnn": CNNEncoder,
    "srupp": SRUppEncoder,
    "transformer_lm": TransformerLMEncoder,
}
MODEL_SCHEMAS: Dict[str, type] = {
    "sru": SRUConfig,
    "lstm": LSTMConfig,
    "cnn": CNNConfig,
    "srupp": SRUppConfig,
    "transformer_lm": TransformerLMConfig,
}


def check_encoder_config(cfg: Mapping[str, Any], causal: bool = False) -> Any:
    """Reject an encoder config before any data is loaded: unknown name or keys, bad types and ranges
    (``MODEL_SCHEMAS``), and a bidirectional encoder for a causal task. Returns it typed (its schema's
    instance)."""
    name = cfg.get("name")
    if name not in ENCODERS:
        raise ConfigError(f"model.name: expected one of {sorted(ENCODERS)}, received {name!r}. "
                          f"Pick one with model=<name>.")
    model = typed(cfg, MODEL_SCHEMAS[name], "model", see=f"conf/model/{name}.yaml")
    if name in CROSS_KEY_CHECKS:
        CROSS_KEY_CHECKS[name](model)
    if causal and getattr(model, "bidirectional", False):  # the CNN has no direction (nor state)
        raise ConfigError("model.bidirectional=true: this task is causal (each position predicts what comes next), "
                          "and a bidirectional encoder would see the very tokens it predicts. "
                          "Set model.bidirectional=false.")
    return model


def build_encoder(cfg: Mapping[str, Any], input_size: int, causal: bool = False) -> nn.Module:
    """Build the encoder named ``cfg["name"]`` with the other keys of ``cfg`` as keyword arguments."""
    check_encoder_config(cfg, causal)
    kwargs = dict(as_plain(cfg))
    name = kwargs.pop("name")
    if "causal" in inspect.signature(ENCODERS[name].__init__).parameters:
        kwargs["causal"] = causal  # encoders with attention mask the future themselves (SRU++)
    try:
        return ENCODERS[name](input_size=input_size, **kwargs)
    except TypeError as err:  # missing keys: say which config group to fix
        raise ValueError(f"model={name}: bad model config keys {sorted(kwargs)} ({err}). "
                         f"See conf/model/{name}.yaml for the accepted keys.") from None


# The recurrent parts of a model, for whoever measures them (bench/task_throughput.py's breakdown, the
# paper's recurrent share): SRU++ layers count whole (their attention computes the recurrence's input);
# a Transformer has none.
RECURRENT = (SRUEncoder, LSTMEncoder, SRUppEncoder, SRU, SRUpp, nn.LSTM)


def recurrent_modules(model: nn.Module) -> List[nn.Module]:
    """The outermost recurrent modules of ``model`` (an SRUEncoder, not also the sru.SRU inside it; the
    sru.SRU of each translation SRU sublayer; a reader's paragraph and question encoders)."""
    found = [m for m in model.modules() if isinstance(m, RECURRENT)]
    inner = {id(sub) for m in found for sub in m.modules() if sub is not m}
    return [m for m in found if id(m) not in inner]
