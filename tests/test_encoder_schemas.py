"""The shared encoders take their config keys from the constructors themselves (tasks/common/model_schemas.py
``signature_schema``): a schema's keys are the encoder's arguments and, for ``model=sru`` / ``model=srupp``, the
layer's; the YAML sets exactly those, and a new layer argument reaches the layer from the YAML with no other edit."""
from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest
from conftest import compose
from omegaconf import OmegaConf

import sru
from sru import SRU, SRUpp
from tasks.common import encoders
from tasks.common.cnn_encoder import CNNEncoder
from tasks.common.model_schemas import CPU_KERNELS, NOT_CONFIG, SRU_RANGES, signature_schema
from tasks.common.rnn_encoders import LSTMEncoder, SRUEncoder
from tasks.common.srupp_encoder import SRUppEncoder
from tasks.common.transformer_lm_encoder import TransformerLMEncoder
from tasks.engine.errors import ConfigError

# model=<name> -> the constructors its keys reach (the encoder, and the layer it passes **layer_args on to)
CONSTRUCTORS = {"sru": (SRUEncoder, SRU), "srupp": (SRUppEncoder, SRUpp), "lstm": (LSTMEncoder,),
                "cnn": (CNNEncoder,), "transformer_lm": (TransformerLMEncoder,)}


def arguments(constructor) -> set:
    return {p.name for p in inspect.signature(constructor).parameters.values() if p.kind is not p.VAR_KEYWORD}


def test_every_encoder_schema_is_read_from_its_constructors():
    assert set(CONSTRUCTORS) == set(encoders.ENCODERS) == set(encoders.MODEL_SCHEMAS)
    assert all(encoders.ENCODERS[name] is owners[0] for name, owners in CONSTRUCTORS.items())


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_the_schema_keys_are_the_constructor_arguments(name):
    schema, owners = encoders.MODEL_SCHEMAS[name], CONSTRUCTORS[name]
    keys = {f.name for f in dataclasses.fields(schema)} - {"name"}
    assert keys == set().union(*map(arguments, owners)) - set(NOT_CONFIG)
    assert arguments(owners[-1]) - keys <= set(NOT_CONFIG)  # every other argument of the layer is a config key
    hints = typing.get_type_hints(schema)
    if name in ("sru", "srupp"):
        assert hints["hidden_size"] is int and typing.get_args(hints["backend"]) == sru.ops.BACKENDS


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_the_yaml_sets_exactly_the_schema_keys(name):
    model = compose(["task=classification" if name == "cnn" else "task=lm", f"model={name}"]).model
    assert set(model) == {f.name for f in dataclasses.fields(encoders.MODEL_SCHEMAS[name])}
    built = encoders.build_encoder(model, 12, causal=name != "cnn")
    assert isinstance(built, CONSTRUCTORS[name][0])
    if name in ("sru", "srupp"):
        assert isinstance(built.rnn, CONSTRUCTORS[name][1]) and built.rnn.hidden_size == model.hidden_size


class SRUWithANewArgument(SRU):
    """sru.SRU with one more constructor argument, as the layer's author would add it (signature and annotation
    copied here, so that the real SRU stays as it is)."""

    def __init__(self, *args, gate_temperature: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate_temperature = gate_temperature


_base = inspect.signature(SRU)
SRUWithANewArgument.__signature__ = _base.replace(parameters=[
    *_base.parameters.values(),
    inspect.Parameter("gate_temperature", inspect.Parameter.KEYWORD_ONLY, default=1.0, annotation=float)])
SRUWithANewArgument.__init__.__annotations__ = {**typing.get_type_hints(SRU.__init__), "gate_temperature": float}


def test_a_new_sru_argument_reaches_the_layer_from_the_yaml_with_no_other_edit(monkeypatch):
    """The schema is rebuilt from the changed layer exactly as model_schemas.py builds it at import; the only
    other change is the argument's value in the config (the line conf/model/sru.yaml would gain)."""
    monkeypatch.setattr(sru, "SRU", SRUWithANewArgument)  # what SRUEncoder builds
    monkeypatch.setitem(encoders.MODEL_SCHEMAS, "sru", signature_schema("sru", (SRUEncoder, SRUWithANewArgument),
                                                                        SRU_RANGES, CPU_KERNELS))
    model = compose(["task=lm", "model=sru"]).model
    with pytest.raises(ConfigError, match="model.gate_temperature: missing"):
        encoders.build_encoder(model, 12)
    OmegaConf.update(model, "gate_temperature", 0.5, force_add=True)
    built = encoders.build_encoder(model, 12)
    assert type(built.rnn) is SRUWithANewArgument and built.rnn.gate_temperature == 0.5
    OmegaConf.update(model, "gate_temperature", "warm")
    with pytest.raises(ConfigError, match="model.gate_temperature: expected a number"):
        encoders.check_encoder_config(model)


def test_a_layer_argument_without_a_type_is_named():
    class Untyped(SRU):
        def __init__(self, input_size: int, hidden_size: int, scale=1.0):
            super().__init__(input_size, hidden_size)

    with pytest.raises(TypeError, match="'scale' has no type annotation"):
        signature_schema("sru", (SRUEncoder, Untyped), SRU_RANGES, CPU_KERNELS)


def test_the_ranges_still_refuse_bad_values_before_any_data():
    model = compose(["task=lm", "model=sru", "model.hidden_size=0"]).model
    with pytest.raises(ConfigError, match=r"model.hidden_size: expected an integer >= 1, received 0"):
        encoders.check_encoder_config(model)
    model = compose(["task=lm", "model=srupp", "model.gemm=blas"]).model
    with pytest.raises(ConfigError, match=r"model.gemm: expected one of \['auto', 'mkl', 'onednn'\]"):
        encoders.check_encoder_config(model)
