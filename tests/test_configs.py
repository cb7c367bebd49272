"""Every config composes, every experiment file instantiates, bad choices fail with the valid ones."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import CONF, compose
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from tasks.common.encoders import ENCODERS, build_encoder
from tasks.engine.base import build_task
from tasks.engine.config.checks import check_trainer

GROUPS = ["task", "model", "trainer", "logger", "paths", "debug", "hparams_search"]
EXPERIMENTS = sorted(str(p.relative_to(CONF / "experiment").with_suffix(""))
                     for p in (CONF / "experiment").rglob("*.yaml"))


def _options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in _options(g)])
def test_every_group_option_composes(group, option):
    cfg = compose([f"{group}={option}"])
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    check_trainer(cfg.trainer)


def _instantiate(cfg):
    """Build the task object and the encoder exactly as training would (no data loading): (task, encoder),
    the encoder None for a task-specific model."""
    check_trainer(cfg.trainer)
    task = build_task(cfg)
    task.check_config()
    width = task.encoder_input_size()
    if width is None:  # a task-specific model (translation: model=transformer): its check_config checked it
        assert cfg.model.name not in ENCODERS, f"task={cfg.task.name} uses a shared encoder but gives no input width"
        return task, None
    return task, build_encoder(task.encoder_config(), width, causal=task.causal)


@pytest.mark.slow
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_instantiates(experiment):
    assert Path(CONF / "experiment" / f"{experiment}.yaml").read_text().startswith("# @package _global_")
    cfg = compose([f"experiment={experiment}"])
    OmegaConf.to_container(cfg, resolve=True)
    _instantiate(cfg)


@pytest.mark.parametrize("model", ["sru", "lstm"])
def test_default_task_builds_with_each_model(model):
    """``python train.py [model=lstm]``: the word-level PTB language model over that encoder, at the size
    conf/model/<model>.yaml gives, fed its embeddings (as wide as the encoder: the weights are tied)."""
    cfg = compose([f"model={model}"])
    assert compose([]).model.name == "sru"
    assert (cfg.task.name, cfg.task.data.source, cfg.task.data.level, cfg.task.tie_weights) == ("lm", "ptb", "word", True)
    task, encoder = _instantiate(cfg)
    assert type(task).__name__ == "LanguageModelingTask" and task.causal
    assert type(encoder) is ENCODERS[model] and not encoder.bidirectional
    assert (encoder.num_layers, encoder.output_size) == (cfg.model.num_layers, cfg.model.hidden_size)
    assert encoder.input_size == task.encoder_input_size() == cfg.model.hidden_size


@pytest.mark.parametrize("table,width", [("ptb", 910), ("enwik8", 1024)])
def test_paper_lm_cells_compare_6_sru_layers_with_a_2_layer_lstm_of_the_same_width(table, width):
    """The literature LSTMs the paper quotes have 2 layers; 2 LSTM layers (8d^2 each) ~ 6 SRU layers (3d^2)."""
    sru, lstm = compose([f"experiment=paper/{table}_sru"]), compose([f"experiment=paper/{table}_lstm"])
    assert sru.task == lstm.task and sru.trainer == lstm.trainer
    assert (sru.model.name, lstm.model.name) == ("sru", "lstm")
    assert sru.model.hidden_size == lstm.model.hidden_size == width
    assert (sru.model.num_layers, lstm.model.num_layers) == (6, 2)


def test_paper_squad_compares_sru_6_layers_with_the_drqa_lstm_3_layers():
    sru, lstm = compose(["experiment=paper/squad_sru"]), compose(["experiment=paper/squad_lstm"])
    assert (sru.model.num_layers, lstm.model.num_layers) == (6, 3)
    assert sru.task.encoder.num_layers == 6 and lstm.task.encoder.num_layers == 3
    assert sru.model.hidden_size == lstm.model.hidden_size == 128 and lstm.model.bidirectional
    assert sru.trainer == lstm.trainer


@pytest.mark.parametrize("experiment,unit,layers,width,bidirectional", [
    ("paper/speech_sru", "sru", 12, 1024, False),     # SRU_12L.ndl
    ("paper/speech_bisru", "sru", 12, 600, True),     # Bi-SRU_12L
    ("paper/speech_lstm", "lstm", 5, 1024, False),    # LSTM_5L.ndl
    ("paper/speech_blstm", "lstm", 5, 512, True),     # BLSTM_5L
])
def test_paper_speech_cells_are_the_official_cntk_networks(experiment, unit, layers, width, bidirectional):
    cfg = compose([f"experiment={experiment}"])
    assert (cfg.model.name, cfg.model.num_layers, cfg.model.hidden_size, cfg.model.bidirectional) == (
        unit, layers, width, bidirectional)
    if unit == "sru":  # FastKernelNN: no c_{t-1} in the gates, tanh(c), highway input projected at every layer
        assert cfg.model.v1 and cfg.model.use_tanh and cfg.model.project_skip
    assert cfg.trainer == compose(["experiment=paper/speech_sru"]).trainer


def _depth(experiment):
    cfg = compose([f"experiment={experiment}"])
    encoder = cfg.task.get("encoder") or {}
    return encoder.get("num_layers") or cfg.model.get("num_layers")


@pytest.mark.slow  # composes every paper and CPU cell's experiment: ~10 s
def test_every_cpu_cell_keeps_its_paper_cells_depth_ratio():
    """SRU depth : baseline depth is the same at CPU scale as in the paper's cell (SQuAD 2:1, speech 12:5)."""
    from reproduce.tables import TABLES
    checked = 0
    for table in TABLES.values():
        for cell in table.cells:
            base = table.baseline_of(cell)
            # SRU++ and the Transformer LM are not the 2018 paper's comparisons (docs/srupp.md)
            # controls and the second Table 1 (spaCy vectors) have no paper experiment of their own
            if base is None or cell.model in ("cnn", "srupp", "transformer") or not (cell.cpu and base.cpu) \
                    or not (cell.paper and base.paper) or _depth(cell.paper) is None:
                continue
            paper = _depth(cell.paper) / _depth(base.paper)
            cpu = _depth(cell.cpu) / _depth(base.cpu)
            assert cpu == paper, f"{cell.cpu} : {base.cpu} = {cpu}, the paper's {cell.paper} : {base.paper} = {paper}"
            checked += 1
    assert checked >= 6


@pytest.mark.parametrize("experiment", [e for e in EXPERIMENTS if e.startswith("cpu/")])
def test_cpu_presets_budget_in_epochs_or_steps_never_minutes(experiment):
    trainer = compose([f"experiment={experiment}"]).trainer
    assert trainer.max_minutes is None, f"{experiment}: trainer.max_minutes={trainer.max_minutes}"
    assert trainer.max_epochs or trainer.max_steps
    assert trainer.early_stopping_patience is not None  # each preset's plateau rule


@pytest.mark.parametrize("override,choices", [("model=gru", "lstm"), ("task=nope", "lm"),
                                              ("logger=mlflow", "tensorboard")])
def test_unknown_group_option_lists_valid_choices(override, choices):
    with pytest.raises(ConfigCompositionException) as err:
        compose([override])
    assert "Available options" in str(err.value) and choices in str(err.value)


def test_bad_model_key_names_the_config_file():
    with pytest.raises(ValueError, match="conf/model/lstm.yaml"):
        build_encoder(compose(["model=lstm", "+model.highway_bias=-3"]).model, 8)


@pytest.mark.slow
def test_seed_zero_seeds_the_run(run_train, tmp_path):
    """seed=0 is a seed (`is not None`, not truthiness): whatever the global RNG held before,
    two runs with seed=0 start from the same weights, so their first losses are identical."""
    import torch
    from conftest import tiny_lm_overrides

    from tasks.engine.run_metrics import read_metrics

    overrides = tiny_lm_overrides(steps=2)
    assert "seed=0" in overrides
    losses = []
    for before in (1, 2):
        torch.manual_seed(before)  # a different global RNG state before each run
        run_train(overrides, tmp_path / str(before))
        losses.append([row["loss"] for row in read_metrics(tmp_path / str(before), "train")])
    assert len(losses[0]) == 2 and losses[0] == losses[1], losses


def test_run_dirs_are_unique_per_process(tmp_path):
    from tasks.engine.train import runner
    run_dir = runner.resolve_run_dir(None, "outputs/runs")
    assert run_dir.startswith("outputs/runs/") and f"_{os.getpid()}-" in run_dir
    with pytest.raises(ValueError, match="checkpoints/last.pt"):
        runner.resolve_run_dir(str(tmp_path), "outputs/runs")
    with pytest.raises(ValueError, match="found none"):
        runner.find_latest_run(str(tmp_path))
