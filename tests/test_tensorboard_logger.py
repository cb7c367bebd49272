"""logger=tensorboard: every logged metric becomes a scalar and the config a text entry, read
back from the event file with TensorBoard's own EventAccumulator."""
from __future__ import annotations

import pytest
from conftest import compose  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from test_trainer import RegressionTask, tiny_trainer_cfg  # noqa: E402

from tasks.engine.training.loggers import build_loggers  # noqa: E402
from conftest import fit_in_run  # noqa: E402

pytest.importorskip("tensorboard")



def _events(log_dir):
    files = list(log_dir.glob("events.out.tfevents.*"))
    assert len(files) == 1, files
    acc = EventAccumulator(str(files[0]), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_and_config_text_are_read_back(tmp_path):
    cfg = compose(["logger=tensorboard"]).logger
    loggers = build_loggers(tmp_path, cfg, {"model": {"hidden_size": 7}, "seed": 3}, "run")
    loggers.log({"split": "train", "step": 1, "epoch": 0, "loss": 2.5, "lr": 0.1})
    loggers.log({"split": "train", "step": 2, "epoch": 0, "loss": 1.5, "lr": 0.1, "note": "text is skipped"})
    loggers.log({"split": "valid", "step": 2, "epoch": 0, "ppl": 12.0})
    loggers.finish()
    acc = _events(tmp_path / "tensorboard")
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/epoch", "valid/ppl", "valid/epoch"} <= tags
    assert not any("note" in t for t in tags)
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == [(1, 2.5), (2, 1.5)]
    assert [(e.step, e.value) for e in acc.Scalars("valid/ppl")] == [(2, 12.0)]
    text = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert '"hidden_size": 7' in text and '"seed": 3' in text
    assert (tmp_path / "metrics.jsonl").exists()  # the jsonl record is kept beside it


@pytest.mark.slow
def test_a_training_run_logs_every_metric_it_records(tmp_path):
    from omegaconf import OmegaConf
    cfg = tiny_trainer_cfg(max_steps=6, max_epochs=None, eval_every_steps=3)
    cfg.logger = compose(["logger=tensorboard"]).logger
    fit_in_run(cfg, RegressionTask(None), tmp_path, config_to_save=OmegaConf.to_container(cfg))
    acc = _events(tmp_path / "tensorboard")
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "valid/mse"} <= tags, tags
    assert [e.step for e in acc.Scalars("valid/mse")][-1] == 6
    assert "trainer" in acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
