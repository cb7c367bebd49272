"""``typed``: after the schema check, one typed object (issue 42, item 1): nested sections are instances of
their schemas, a key misspelt in code fails at once, and what check_schema refuses is refused."""
from __future__ import annotations

import dataclasses

import pytest
from conftest import compose
from omegaconf import OmegaConf

from tasks.classification.schema import ClassificationConfig
from tasks.common.encoders import check_encoder_config
from tasks.common.model_schemas import CNNConfig, SRUConfig
from tasks.engine.errors import ConfigError
from tasks.engine.base import build_task
from tasks.engine.config.schema import SplitPaths, as_plain, typed
from tasks.engine.config.trainer_schema import ExplosionConfig, OptimizerConfig, SchedulerConfig, TrainerConfig


def test_nested_sections_become_instances_of_their_schemas():
    cfg = compose([])
    t = typed(cfg.trainer, TrainerConfig, "trainer")
    assert isinstance(t, TrainerConfig)
    assert isinstance(t.optimizer, OptimizerConfig) and isinstance(t.scheduler, SchedulerConfig)
    assert isinstance(t.explosion, ExplosionConfig)
    assert t.optimizer.lr == cfg.trainer.optimizer.lr and t.grad_clip == cfg.trainer.grad_clip
    assert isinstance(t.optimizer.betas, list) and t.optimizer.betas == list(cfg.trainer.optimizer.betas)


def test_optional_sections_lists_and_plain_mappings():
    cfg = compose(["task=classification", "model=cnn"])
    task = typed(cfg.task, ClassificationConfig, "task")
    assert isinstance(task.data.files, SplitPaths)          # Optional[SplitPaths], set: an instance
    assert task.data.hub_splits is None                     # Optional[Dict], null: None
    model = typed(cfg.model, CNNConfig, "model")
    assert isinstance(model.widths, list) and not OmegaConf.is_config(model.widths)
    with_splits = OmegaConf.merge(cfg.task, {"data": {"hub_splits": {"train": "tr"}}})
    assert typed(with_splits, ClassificationConfig, "task").data.hub_splits == {"train": "tr"}  # a plain dict


def test_what_check_schema_refuses_typed_refuses():
    trainer = OmegaConf.to_container(compose([]).trainer)
    with pytest.raises(ConfigError, match="trainer.grad_clip: expected a number >= 0"):
        typed({**trainer, "grad_clip": -1.0}, TrainerConfig, "trainer")
    with pytest.raises(ConfigError, match="trainer.max_step: not a key"):
        typed({**trainer, "max_step": 5}, TrainerConfig, "trainer")
    del trainer["optimizer"]["lr"]
    with pytest.raises(ConfigError, match="trainer.optimizer.lr: missing"):
        typed(trainer, TrainerConfig, "trainer")


def test_a_key_misspelt_in_code_is_an_attribute_error():
    t = typed(compose([]).trainer, TrainerConfig, "trainer")
    with pytest.raises(AttributeError):
        t.grad_clipping  # noqa: B018


def test_an_instance_passes_through_and_as_plain_gives_the_mapping_back():
    cfg = compose(["model=sru"])
    model = typed(cfg.model, SRUConfig, "model")
    assert typed(model, SRUConfig, "model") is model
    assert as_plain(model) == OmegaConf.to_container(cfg.model, resolve=True)
    assert dataclasses.is_dataclass(check_encoder_config(cfg.model))


def test_a_task_reads_its_typed_section_and_a_python_built_config_gets_the_same():
    """A config built in Python (plain dicts) gets exactly the typed object the command line gets."""
    cfg = compose(["task=lm", "model=sru"])
    task = build_task(cfg)
    task.check_config()
    plain = {k: OmegaConf.to_container(cfg[k], resolve=True) for k in ("task", "model")}
    from_python = build_task({**plain, "seed": cfg.seed})  # plain dicts, no OmegaConf
    assert task.task_cfg == from_python.task_cfg
    assert task.task_cfg.data.level == cfg.task.data.level


# sru.SRU / SRUpp arguments that are not config keys: the width comes from the task, the others are
# Python-side options of the layer (a module, a return convention, the batch layout the encoder sets).
# The GEMM library is a config key of the SRU model (model.gemm, conf/model/sru.yaml); SRU++ keeps its default.
NOT_CONFIG = {"input_size", "custom_m", "nn_rnn_compatible_return", "batch_first"}
ENCODER_ONLY = {"name", "forget_bias", "mem_len"}  # keys the encoders read themselves (tasks/common/)
# arguments a model's encoder leaves at the layer's default on purpose (tasks/common/srupp_encoder.py)
KEPT_AT_DEFAULT = {"srupp": {"proj_input_to_hidden_first", "weight_c_init", "backend", "gemm"}, "sru": set()}


@pytest.mark.parametrize("layer, model", [("SRU", "sru"), ("SRUpp", "srupp")])
def test_layer_schema_matches_the_layer_signature(layer, model):
    """The model schema spells sru.SRU's / sru.SRUpp's arguments: the same names, and each of the layer's
    defaults is a value the schema accepts (the YAML's own values aside), so an argument added to the layer
    without its config key, or renamed, fails here."""
    import dataclasses
    import inspect

    import sru
    from tasks.common.encoders import MODEL_SCHEMAS

    schema = MODEL_SCHEMAS[model]
    params = {n: p for n, p in inspect.signature(getattr(sru, layer)).parameters.items() if n not in NOT_CONFIG}
    fields = {f.name for f in dataclasses.fields(schema)} - ENCODER_ONLY
    missing = set(params) - fields - KEPT_AT_DEFAULT[model]
    assert not missing, f"{layer} arguments without a model.* key in {schema.__name__}: {sorted(missing)}"
    assert fields <= set(params), f"{schema.__name__} keys that {layer} does not take: {sorted(fields - set(params))}"
    yaml = OmegaConf.to_container(compose([f"model={model}"]).model, resolve=True)
    for name in fields:
        default = params[name].default
        if default is inspect.Parameter.empty:
            continue  # the layer has no default: the YAML's value is the only one
        typed({**yaml, name: default}, schema, "model")  # the layer's default is a valid config value
