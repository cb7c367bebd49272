"""Every config composes, every experiment file instantiates, bad choices fail with the valid ones."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import CONF, compose
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from tasks.common.encoders import ENCODERS, build_encoder
from tasks.engine.registry import build_task
from tasks.engine.trainer import check_trainer_config

GROUPS = ["task", "model", "trainer", "logger", "paths", "debug", "hparams_search"]
EXPERIMENTS = sorted(str(p.relative_to(CONF / "experiment").with_suffix(""))
                     for p in (CONF / "experiment").rglob("*.yaml"))


def _options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in _options(g)])
def test_every_group_option_composes(group, option):
    cfg = compose([f"{group}={option}"])
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    check_trainer_config(cfg.trainer)


def _instantiate(cfg):
    """Build the task object and the encoder exactly as training would (no data loading)."""
    check_trainer_config(cfg.trainer)
    task = build_task(cfg)
    task.check_config()
    width = task.encoder_input_size()
    if width is None:  # a task-specific model (translation: model=transformer): its check_config checked it
        assert cfg.model.name not in ENCODERS, f"task={cfg.task.name} uses a shared encoder but gives no input width"
        return task
    build_encoder(task.encoder_config(), width, causal=task.causal)
    return task


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_instantiates(experiment):
    assert Path(CONF / "experiment" / f"{experiment}.yaml").read_text().startswith("# @package _global_")
    cfg = compose([f"experiment={experiment}"])
    OmegaConf.to_container(cfg, resolve=True)
    _instantiate(cfg)


@pytest.mark.parametrize("model", ["sru", "lstm"])
def test_default_task_builds_with_each_model(model):
    _instantiate(compose([f"model={model}"]))


def test_paper_ptb_sru_and_lstm_share_the_recipe():
    sru, lstm = compose(["experiment=paper/ptb_sru"]), compose(["experiment=paper/ptb_lstm"])
    assert sru.task == lstm.task and sru.trainer == lstm.trainer
    assert (sru.model.name, lstm.model.name) == ("sru", "lstm")
    assert sru.model.hidden_size == lstm.model.hidden_size == 910
    assert sru.model.num_layers == lstm.model.num_layers == 6


@pytest.mark.parametrize("override,choices", [("model=gru", "lstm"), ("task=nope", "lm"),
                                              ("logger=mlflow", "tensorboard")])
def test_unknown_group_option_lists_valid_choices(override, choices):
    with pytest.raises(ConfigCompositionException) as err:
        compose([override])
    assert "Available options" in str(err.value) and choices in str(err.value)


@pytest.mark.parametrize("override,message", [
    ("trainer.precision=fp8", "expected one of ['fp32', 'bf16', 'fp16']"),
    ("trainer.optimizer.name=lbfgs", "expected one of ['sgd', 'adam', 'adamw', 'adamax']"),
    ("trainer.scheduler.name=linear", "expected one of ['constant', 'step'"),
])
def test_bad_trainer_value_names_valid_values(override, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_trainer_config(compose([override]).trainer)


def test_bad_model_key_names_the_config_file():
    with pytest.raises(ValueError, match="conf/model/lstm.yaml"):
        build_encoder(compose(["model=lstm", "+model.highway_bias=-3"]).model, 8)


def test_seed_zero_seeds_the_run(run_train, tmp_path):
    """seed=0 is a seed (`is not None`, not truthiness): whatever the global RNG held before,
    two runs with seed=0 start from the same weights, so their first losses are identical."""
    import torch
    from conftest import tiny_lm_overrides

    from tasks.engine.results import read_metrics

    overrides = tiny_lm_overrides(steps=2)
    assert "seed=0" in overrides
    losses = []
    for before in (1, 2):
        torch.manual_seed(before)  # a different global RNG state before each run
        run_train(overrides, tmp_path / str(before))
        losses.append([row["loss"] for row in read_metrics(tmp_path / str(before), "train")])
    assert len(losses[0]) == 2 and losses[0] == losses[1], losses


def test_run_dirs_are_unique_per_process(tmp_path):
    from tasks.engine import runner
    run_dir = runner.resolve_run_dir(None, "outputs/runs")
    assert run_dir.startswith("outputs/runs/") and f"_{os.getpid()}-" in run_dir
    with pytest.raises(ValueError, match="checkpoints/last.pt"):
        runner.resolve_run_dir(str(tmp_path), "outputs/runs")
    with pytest.raises(ValueError, match="found none"):
        runner.find_latest_run(str(tmp_path))
