"""Every config value has one home, the YAML under conf/ (issue 42, item 1):

- no schema dataclass holds a default (it would be a second value, silently outvoted by the YAML, or
  silently used by a config built in Python);
- every composed task x model config sets every key its schemas name, so no constructor or code
  default is ever reached (the experiment files: test_configs.py's test_every_experiment_instantiates);
- no code fallback supplies a value for a schema key (``cfg.get("patience") or 1`` beside a YAML 3);
- a config saved before a key joined conf/ (the recorded paper runs) is completed from conf/ and passes.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import typing
from pathlib import Path

import pytest
from conftest import ROOT, compose
from omegaconf import OmegaConf

from sru import SRU
from tasks.common.encoders import MODEL_SCHEMAS, check_encoder_config
from tasks.engine.errors import ConfigError
from tasks.engine.base import available_tasks, build_task, task_class
from tasks.engine.config.saved import fill_added_keys, group_choices
from tasks.engine.config.schema import optional_inner
from tasks.engine.config.checks import check_trainer
from tasks.engine.config.trainer_schema import TrainerConfig
from tasks.translation.schema import SubwordConfig, TransformerConfig

TASK_OPTIONS = sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml"))
SCHEMAS = [TrainerConfig, TransformerConfig, SubwordConfig, *MODEL_SCHEMAS.values(),
           *(task_class(name).schema for name in available_tasks())]
RECORDS = sorted((ROOT / "docs" / "paper" / "runs").glob("*/*/seed1/config.yaml"))

# ``.get(<schema key>, <value>)`` calls whose receiver is not a config section, and the one rule kept on
# purpose (a key that is absent by design): (file, key) -> why.
NOT_A_SECOND_DEFAULT = {
    ("tasks/translation/data.py", "valid"): "a dict of the splits read, not the config",
    ("tasks/translation/data.py", "test"): "a dict of the splits read, not the config",
    ("tasks/translation/task.py", "source"): "an example record, not the config",
    ("tasks/classification/data.py", "text_column"): "null in conf/task/classification.yaml, the rule beside it",
    ("tasks/classification/data.py", "label_column"): "null in conf/task/classification.yaml, the rule beside it",
    ("tasks/classification/data.py", "subset"): "null in conf/task/classification.yaml, the rule beside it",
    # found when the scan learned the typed form (x.key or value); older than it, left for their owners
    ("tasks/classification/cross_validation.py", "max_epochs"): "a results column: null (no limit) written as 0",
    ("reproduce/recurrent_share.py", "seed"): "to remove: seed is set in conf/config.yaml",
}


def _schemas_within(schema: type):
    yield schema
    for f in dataclasses.fields(schema):
        inner, _ = optional_inner(typing.get_type_hints(schema)[f.name])
        if dataclasses.is_dataclass(inner):
            yield from _schemas_within(inner)


def _all_schemas():
    return {s for top in SCHEMAS for s in _schemas_within(top)}


def test_no_schema_holds_a_default():
    defaults = [f"{s.__module__}.{s.__name__}.{f.name}" for s in _all_schemas() for f in dataclasses.fields(s)
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING]
    assert len(_all_schemas()) >= 20  # the walk reached the nested sections
    assert not defaults, f"schema defaults (the value belongs in conf/): {defaults}"


def _task_model_pairs():
    for option in TASK_OPTIONS:
        cls = task_class(compose([f"task={option}"]).task.name)
        yield from ((option, model) for model in cls.models)


@pytest.mark.parametrize("task,model", list(_task_model_pairs()))
def test_every_task_and_model_config_sets_every_schema_key(task, model):
    """The schemas refuse a missing key: passing means conf/ alone gives every value of this run."""
    cfg = compose([f"task={task}", f"model={model}"])
    check_trainer(cfg.trainer)
    build_task(cfg).check_config()  # task.* and model.* against their schemas


def test_a_missing_key_is_refused_naming_the_file_that_sets_it():
    model = OmegaConf.to_container(compose(["model=sru"]).model)
    del model["highway_bias"]
    with pytest.raises(ConfigError, match=r"model.highway_bias: missing; .*conf/model/sru.yaml.*config.tree.compose"):
        check_encoder_config(model)


def _schema_keys():
    return {f.name for s in _all_schemas() for f in dataclasses.fields(s)}


def _fallbacks(path: Path, keys):
    """``x.get("key", value)`` (value not None), ``x.get("key") or value`` and, on a typed section,
    ``x.key or value`` for a schema key."""
    for node in ast.walk(ast.parse(path.read_text())):
        call, fallback = None, None
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and isinstance(node.values[-1], ast.Constant):
            call, fallback = node.values[0], node.values[-1]
        elif isinstance(node, ast.Call) and len(node.args) == 2:
            call, fallback = node, node.args[1]
            if isinstance(fallback, ast.Constant) and fallback.value is None:
                continue
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "get"
                and call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value in keys):
            yield call.args[0].value, node.lineno, ast.unparse(fallback)
        elif (isinstance(node, ast.BoolOp) and isinstance(call, ast.Attribute) and call.attr in keys
              and not (isinstance(call.value, ast.Name) and call.value.id == "self")):  # self.x: a module's own
            yield call.attr, node.lineno, ast.unparse(fallback)


def test_no_code_fallback_supplies_a_second_value_for_a_config_key():
    keys, found, exempt_seen = _schema_keys(), [], set()
    for path in sorted([*(ROOT / "tasks").rglob("*.py"), *(ROOT / "reproduce").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for key, line, value in _fallbacks(path, keys):
            if (rel, key) in NOT_A_SECOND_DEFAULT:
                exempt_seen.add((rel, key))
            else:
                found.append(f"{rel}:{line}: {key!r} -> {value}")
    assert not found, "a config key's value belongs in conf/ (null + the rule beside it for 'derive it'):\n" + \
        "\n".join(found)
    stale = set(NOT_A_SECOND_DEFAULT) - exempt_seen
    assert not stale, f"exemptions whose fallback is gone (remove them): {sorted(stale)}"


def test_the_scan_finds_the_fallbacks_it_forbids(tmp_path):
    """The scan above is not blind: every form of fallback is reported."""
    code = tmp_path / "loop.py"
    code.write_text('p = int(explosion.get("patience") or 1)\nw = cfg.get("warmup_steps", 0)\n'
                    'ok = cfg.get("factor", None)\nm = cfg.min_lr or 0.0\n')
    assert sorted(k for k, _, _ in _fallbacks(code, {"patience", "warmup_steps", "factor", "min_lr"})) == [
        "min_lr", "patience", "warmup_steps"]


@functools.lru_cache(maxsize=None)
def _conf_text(choices: tuple) -> str:
    return OmegaConf.to_yaml(compose(list(choices)))  # kept as text: each use gets its own config


def _current_conf(saved):
    """conf/ composed for the saved config's task, model and logger (many records share them)."""
    return OmegaConf.create(_conf_text(tuple(group_choices(saved))))


def _leaves(tree, prefix=""):
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    return {k: v for name, sub in tree.items() for k, v in _leaves(sub, f"{prefix}.{name}" if prefix else name).items()}


@pytest.mark.parametrize("record", RECORDS, ids=[p.parts[-3] for p in RECORDS])
def test_a_config_saved_before_a_key_joined_conf_is_completed_from_conf(record):
    """The recorded paper runs were saved by earlier versions: completed, they pass every check, and
    the keys they had keep their values."""
    saved = OmegaConf.load(record)
    before = OmegaConf.to_container(saved)
    added = fill_added_keys(saved, _current_conf(saved))
    check_trainer(saved.trainer)
    build_task(saved).check_config()
    after = _leaves(OmegaConf.to_container(saved))
    assert all(after[name] == value for name, value in _leaves(before).items())
    assert not set(added) & set(_leaves(before))


def test_an_sru_run_saved_before_the_sru_keys_joined_conf_gets_the_layers_own_defaults():
    saved = OmegaConf.load(ROOT / "docs" / "paper" / "runs" / "cpu" / "ptb_sru" / "seed1" / "config.yaml")
    with pytest.raises(ConfigError, match="missing"):
        check_encoder_config(saved.model)
    added = fill_added_keys(saved, _current_conf(saved))
    sru_keys = ("has_skip_term", "project_skip", "v1", "proj_input_to_hidden_first", "normalize_after",
                "weight_c_init", "amp_recurrence_fp16", "backend", "gemm")
    assert sorted(k for k in added if k.startswith("model.")) == sorted(f"model.{k}" for k in sru_keys)
    layer_defaults = inspect.signature(SRU).parameters
    assert {k: saved.model[k] for k in sru_keys} == {k: layer_defaults[k].default for k in sru_keys}
