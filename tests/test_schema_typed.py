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
