"""torchrun entry for tests/test_contract.py: train the toy task with the real trainer, write the weights.

    python -m torch.distributed.run --nproc_per_node=2 tests/contract_worker.py OUT_DIR ACCUMULATE BATCH_SIZE
"""
import json
import os
import sys
from pathlib import Path

import torch
from toy_task import ToyTask

from tasks.engine.run import distributed
from tasks.engine.train.runner import compose
from tasks.engine.run.context import open_run
from tasks.engine.training.trainer import evaluate_best, fit

OVERRIDES = ["model=sru", "model.hidden_size=8", "model.num_layers=2", "model.dropout=0", "model.rnn_dropout=0",
             "logger=none", "trainer.progress_bar=false", "trainer.plot=false", "trainer.log_every_steps=1",
             "trainer.optimizer.name=sgd", "trainer.optimizer.lr=0.5", "trainer.optimizer.weight_decay=0",
             "trainer.grad_clip=null", "trainer.max_epochs=null", "trainer.max_steps=5",
             "trainer.eval_every_steps=null", "trainer.device=cpu", "seed=3"]


def train_toy(out_dir: Path, accumulate: int, batch_size: int) -> dict:
    cfg = compose(OVERRIDES + [f"trainer.accumulate={accumulate}"])
    task = ToyTask(cfg, batch_size=batch_size)
    with open_run(cfg, out_dir) as ctx:  # the one run context, as the runner opens it
        result = fit(cfg, task, ctx)
        test = evaluate_best(task, result, ctx, "test")
    model = torch.load(result.last_checkpoint, weights_only=True)["model"] if distributed.is_main() else None
    return {"valid": result.final_valid, "test": test,
            "weights": None if model is None else {k: v.flatten().tolist() for k, v in model.items()}}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    summary = train_toy(out, int(sys.argv[2]), int(sys.argv[3]))
    if distributed.is_main():
        (out / "summary.json").write_text(json.dumps(summary))
    distributed.cleanup()
    # Leave without interpreter finalisation: gloo's worker threads can still hold tensors then, and
    # tearing them down aborts the process now and then ("terminate called without an active exception",
    # seen once in CI after a complete run; pytorch/pytorch#179291 and #190489). Everything is written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
