"""Evaluation shared by every task: summed counts across batches and ranks, records gathered to rank 0.

    metrics = evaluate(task, model, "valid", device, precision, run_dir=run_dir)

Each rank runs ``task.eval_step`` on its own batches; the summable logging outputs are all-reduced
(exact global sums), then divided once by ``task.reduce_metrics``. The per-example records of every rank
are gathered to rank 0, where ``task.end_eval`` writes predictions files into ``run_dir`` and may add
metrics that need all records; rank 0 then shares the final metrics with every rank, so all ranks take
the same decisions (best checkpoint, early stopping).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import torch
from torch import nn

from tasks.engine.run import distributed
from tasks.engine.base import Task, sum_logging_outputs
from tasks.engine.training.checkpoint import load_checkpoint
from tasks.engine.run.devices import autocast

if TYPE_CHECKING:
    from tasks.engine.run.context import RunContext


def gather_records(records: List[Dict[str, Any]]) -> Optional[List[Dict[str, Any]]]:
    """Every rank's records on rank 0, in rank order, each exactly once (None on other ranks)."""
    per_rank = distributed.gather_to_main(records)
    if per_rank is None:
        return None
    return [r for rank_records in per_rank for r in rank_records]


@torch.no_grad()
def evaluate(task: Task, model: nn.Module, split: str, device: torch.device, precision: str,
             max_batches: Optional[int] = None, run_dir: Optional[Path] = None) -> Dict[str, float]:
    was_training = model.training
    model.eval()
    outputs, records = [], []
    for i, batch in enumerate(task.batches(split)):
        if max_batches is not None and i >= max_batches:
            break
        with autocast(device, precision):
            logging_output, batch_records = task.eval_step(model, task.move_to_device(batch, device), split)
        outputs.append(logging_output)
        records.extend(batch_records)
    model.train(was_training)
    # each DDP rank evaluated its shard of the split: add the sums of all ranks, then divide once
    metrics = task.reduce_metrics(distributed.all_reduce_sum(sum_logging_outputs(outputs)))
    everyone = gather_records(records)
    if distributed.is_main():
        metrics.update(task.end_eval(split, everyone or [], metrics, run_dir) or {})
    return distributed.broadcast_object(metrics)


def evaluate_checkpoint(task: Task, checkpoint: Path, ctx: "RunContext",
                        split: str = "test") -> Dict[str, float]:
    """Evaluate ``split`` with the weights of ``checkpoint`` (train.py: the best one, on test) in the run
    context of the training (its devices; predictions files into its run dir)."""
    distributed.barrier()  # rank 0 has finished writing the checkpoint
    model = task.build_model().to(ctx.device)
    model.load_state_dict(load_checkpoint(checkpoint, map_location=ctx.device)["model"])
    return evaluate(task, model, split, ctx.device, ctx.config.trainer.precision, run_dir=ctx.run_dir)
