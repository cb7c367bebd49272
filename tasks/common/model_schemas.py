"""Schemas of the shared encoders' ``model`` config groups (conf/model/{sru,srupp,transformer_lm,lstm,cnn}.yaml):
each key's type and range (values live in the YAML files; see ``tasks/engine/config/schema.py``). A key an encoder
does not take is refused before any data is loaded."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Literal, Optional

from sru.ops.backends import BACKENDS
from tasks.engine.errors import ConfigError
from tasks.engine.config.schema import key

Rate = dict(low=0, high=1, high_open=True)  # a dropout probability: [0, 1)


@dataclass(kw_only=True)
class SRUConfig:
    """sru.SRU's constructor arguments (conf/model/sru.yaml), plus the encoder's forget_bias."""
    name: Literal["sru"]
    hidden_size: int = key(low=1)
    num_layers: int = key(low=1)
    dropout: float = key(**Rate)
    rnn_dropout: float = key(**Rate)
    bidirectional: bool = key()
    layer_norm: bool = key()
    highway_bias: float = key()
    forget_bias: float = key()
    rescale: bool = key()
    use_tanh: bool = key()
    projection_size: int = key(low=0)
    has_skip_term: bool = key()
    project_skip: bool = key()   # highway input W_h x_t at every layer (k = 4), the CNTK speech SRU
    v1: bool = key()
    proj_input_to_hidden_first: bool = key()
    normalize_after: bool = key()
    weight_c_init: Optional[float] = key()
    amp_recurrence_fp16: bool = key()
    backend: Literal[BACKENDS] = key()  # the names of sru/ops/backends.py's table
    gemm: Literal["auto", "mkl", "onednn"] = key()  # CPU GEMM library (sru/ops/cpu/gemm.py LIBRARIES)


@dataclass(kw_only=True)
class SRUppConfig:
    """sru.SRUpp's constructor arguments (conf/model/srupp.yaml), plus the encoder's mem_len."""
    name: Literal["srupp"]
    hidden_size: int = key(low=1)
    proj_size: int = key(low=0)
    num_layers: int = key(low=1)
    num_heads: int = key(low=1)
    dropout: float = key(**Rate)
    attn_dropout: float = key(**Rate)
    bidirectional: bool = key()
    layer_norm: bool = key()
    normalize_after: bool = key()
    attn_layer_norm: bool = key()
    highway_bias: float = key()
    attention_every_n_layers: int = key(low=1)
    attention_last_n_layers: int = key(low=-1)
    rescale: bool = key()
    mem_len: Optional[int] = key(low=0)


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




@dataclass(kw_only=True)
class TransformerLMConfig:
    """tasks/common/transformer_lm_encoder.py's arguments (conf/model/transformer_lm.yaml)."""
    name: Literal["transformer_lm"]
    hidden_size: int = key(low=1)
    num_layers: int = key(low=1)
    num_heads: int = key(low=1)
    ffn_size: int = key(low=0)
    dropout: float = key(**Rate)
    attn_dropout: float = key(**Rate)
    bidirectional: bool = key()
    mem_len: Optional[int] = key(low=0)


@dataclass(kw_only=True)
class LSTMConfig:
    name: Literal["lstm"]
    hidden_size: int = key(low=1)
    num_layers: int = key(low=1)
    dropout: float = key(**Rate)
    bidirectional: bool = key()
    init: Literal["torch", "keras"] = key()


@dataclass(kw_only=True)
class CNNConfig:
    name: Literal["cnn"]
    widths: List[int] = key(low=1)
    filters: int = key(low=1)
    activation: Literal["relu", "tanh"] = key()


def check_transformer_lm_keys(cfg: TransformerLMConfig) -> None:
    """The encoder refuses it only when built, after the data is loaded (``cfg``: typed)."""
    if cfg.hidden_size % cfg.num_heads:
        raise ConfigError(f"model.hidden_size={cfg.hidden_size} must be a multiple of "
                          f"model.num_heads={cfg.num_heads} (each head takes an equal share)")


CROSS_KEY_CHECKS = {"srupp": check_srupp_keys, "transformer_lm": check_transformer_lm_keys}  # after the schema
