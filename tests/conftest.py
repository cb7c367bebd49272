"""Shared test helpers: compose the real Hydra config and run the real train.py pipeline in-process."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
LM_FIXTURE = ROOT / "tests" / "fixtures" / "lm"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("WANDB_MODE", "disabled")  # tests never talk to wandb servers


def compose(overrides: Sequence[str] = ()):
    """The config ``python train.py <overrides>`` would run with (the hydra node excluded)."""
    import train  # noqa: F401  (registers the run_dir / run_id resolvers)
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def tiny_lm_overrides(model: str = "sru", steps: int = 12) -> List[str]:
    """A seconds-long LM run on the fixture: small model, short BPTT, Adam, evaluation every 4 steps."""
    return [
        "task=lm", f"model={model}",
        "task.data.source=files",
        f"task.data.train_file={LM_FIXTURE / 'train.txt'}",
        f"task.data.valid_file={LM_FIXTURE / 'valid.txt'}",
        f"task.data.test_file={LM_FIXTURE / 'test.txt'}",
        "task.batch_size=4", "task.eval_batch_size=4", "task.bptt=8",
        "task.emb_dropout=0.1", "task.out_dropout=0.1",
        "model.hidden_size=32", "model.num_layers=2",
        "trainer.optimizer.name=adam", "trainer.optimizer.lr=0.03", "trainer.optimizer.weight_decay=0",
        f"trainer.max_steps={steps}", "trainer.max_epochs=null", "trainer.eval_every_steps=4",
        "trainer.log_every_steps=1", "trainer.progress_bar=false", "trainer.plot=false",
        "trainer.num_threads=1", "logger=csv", "seed=0",
    ]


@pytest.fixture
def run_train():
    """run_train(overrides, run_dir) -> summary dict, exactly as train.py's main would run it."""
    import train

    def _run(overrides: Sequence[str], run_dir: Path):
        cfg = compose(overrides)
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        return train.run(cfg, Path(run_dir), overrides)

    return _run
