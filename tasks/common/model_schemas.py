"""Schemas of the shared encoders' ``model`` config groups (conf/model/{sru,srupp,transformer_lm,lstm,cnn}.yaml):
each key's type and range (values live in the YAML files; see ``tasks/engine/config/schema.py``). A key an encoder
does not take is refused before any data is loaded.

No schema here is written by hand: ``signature_schema`` reads each from the constructors its config reaches, the
encoder's and, for the layer's encoders (``model=sru``, ``model=srupp``), the layer's, which the encoder passes
on as ``**layer_args``. So ``model.hidden_size`` is declared once, in ``sru.SRU``'s signature (or the encoder's),
and valued once, in conf/model/<name>.yaml; the tables below add the ranges and choices an annotation cannot say."""
from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Dict, Literal, Sequence

from sru import SRU, SRUpp
from sru.ops import BACKENDS, LIBRARIES
from tasks.common.cnn_encoder import CNNEncoder
from tasks.common.rnn_encoders import LSTMEncoder, SRUEncoder
from tasks.common.srupp_encoder import SRUppEncoder
from tasks.common.transformer_lm_encoder import TransformerLMEncoder
from tasks.engine.errors import ConfigError
from tasks.engine.config.schema import key

Rate = dict(low=0, high=1, high_open=True)  # a dropout probability: [0, 1)
# The constructors' arguments that are not config keys: the task gives the input width and whether it is causal,
# and the encoder fixes the layer's layout (time-major, ``(h, c)`` returned) and builds its modules itself.
NOT_CONFIG = ("input_size", "causal", "batch_first", "nn_rnn_compatible_return", "custom_m")


def signature_schema(name: str, constructors: Sequence[type], ranges: Dict[str, dict],
                     choices: Dict[str, tuple]) -> type:
    """The schema of ``model=<name>``, read from the constructors its keys reach, in order: the encoder's own
    arguments (``forget_bias``, ``mem_len``, ...), then the layer's, which the encoder passes on as ``**layer_args``.
    Each key's type is its argument's annotation; ``ranges`` (``key``'s bounds) and ``choices`` (a Literal's
    values) add what an annotation cannot say. So a new layer argument is one edit to the layer and its value
    in conf/model/<name>.yaml: nothing between them names it (tests/test_encoder_schemas.py)."""
    fields = [("name", Literal[name])]
    for owner in constructors:
        hints = typing.get_type_hints(owner.__init__)
        for arg in inspect.signature(owner).parameters.values():
            if arg.name in NOT_CONFIG or arg.kind is arg.VAR_KEYWORD or any(arg.name == f[0] for f in fields):
                continue
            if arg.name not in hints and arg.name not in choices:
                raise TypeError(f"{owner.__name__}'s argument {arg.name!r} has no type annotation: model={name}'s "
                                f"schema reads each key's type from it (tasks/common/model_schemas.py)")
            tp = Literal[choices[arg.name]] if arg.name in choices else hints[arg.name]
            fields.append((arg.name, tp, key(**ranges.get(arg.name, {}))))
    names = " and ".join(f"{c.__name__}'s" for c in constructors)
    return dataclasses.make_dataclass(
        f"{constructors[-1].__name__.removesuffix('Encoder')}Config", fields, kw_only=True,
        namespace={"__doc__": f"{names} arguments (conf/model/{name}.yaml), read from the signatures.",
                   "__module__": __name__})


CPU_KERNELS = dict(backend=BACKENDS, gemm=LIBRARIES)  # the names of sru/ops/backends.py's table; GEMM libraries
SRU_RANGES = dict(hidden_size=dict(low=1), num_layers=dict(low=1), dropout=Rate, rnn_dropout=Rate,
                  projection_size=dict(low=0))
SRUPP_RANGES = dict(hidden_size=dict(low=1), proj_size=dict(low=0), num_layers=dict(low=1), num_heads=dict(low=1),
                    dropout=Rate, attn_dropout=Rate, attention_every_n_layers=dict(low=1),
                    attention_last_n_layers=dict(low=-1), mem_len=dict(low=0))
SRUConfig = signature_schema("sru", (SRUEncoder, SRU), SRU_RANGES, CPU_KERNELS)
SRUppConfig = signature_schema("srupp", (SRUppEncoder, SRUpp), SRUPP_RANGES, CPU_KERNELS)
TransformerLMConfig = signature_schema("transformer_lm", (TransformerLMEncoder,), dict(
    hidden_size=dict(low=1), num_layers=dict(low=1), num_heads=dict(low=1), ffn_size=dict(low=0), dropout=Rate,
    attn_dropout=Rate, mem_len=dict(low=0)), {})
LSTMConfig = signature_schema("lstm", (LSTMEncoder,), dict(hidden_size=dict(low=1), num_layers=dict(low=1),
                                                           dropout=Rate), dict(init=("torch", "keras")))
CNNConfig = signature_schema("cnn", (CNNEncoder,), dict(widths=dict(low=1), filters=dict(low=1)),
                             dict(activation=("relu", "tanh")))


def check_srupp_keys(cfg: SRUppConfig) -> None:
    """What no single model=srupp key says; sru.SRUpp would refuse it only after the data is loaded. Called
    after the schema check, with the typed config."""
    proj = cfg.proj_size or max(cfg.hidden_size // 4, 1)  # 0: the encoder's hidden_size / 4 (conf/model/srupp.yaml)
    heads, layers = cfg.num_heads, cfg.num_layers
    given = f"model.proj_size={proj}" if cfg.proj_size else f"model.proj_size=0 (hidden_size / 4 = {proj})"
    if proj % heads:
        fits = [h for h in range(1, min(proj, 64) + 1) if proj % h == 0]
        raise ConfigError(f"{given} must be divisible by model.num_heads={heads} (each head takes an equal share); "
                          f"use model.num_heads in {fits} or another proj_size")
    every, last = cfg.attention_every_n_layers, cfg.attention_last_n_layers
    if last > layers:
        raise ConfigError(f"model.attention_last_n_layers={last} exceeds model.num_layers={layers}; use 1..{layers}, "
                          f"or -1 for attention in every layer")
    if every != 1 and last != -1:
        raise ConfigError(f"model.attention_every_n_layers={every} and model.attention_last_n_layers={last}: set at "
                          f"most one of them, leave the other at its default (1 / -1)")


def check_transformer_lm_keys(cfg: TransformerLMConfig) -> None:
    """The encoder refuses it only when built, after the data is loaded (``cfg``: typed)."""
    if cfg.hidden_size % cfg.num_heads:
        raise ConfigError(f"model.hidden_size={cfg.hidden_size} must be a multiple of "
                          f"model.num_heads={cfg.num_heads} (each head takes an equal share)")


CROSS_KEY_CHECKS = {"srupp": check_srupp_keys, "transformer_lm": check_transformer_lm_keys}  # after the schema
