"""Run under `torchrun --nproc_per_node=2`: exercises tasks/engine/run/distributed.py with a real gloo group.

Writes one JSON per rank into the directory given as argv[1]; tests/test_distributed.py checks them.
"""
import json
import os
import sys

import torch

from tasks.engine.run import distributed as D


def full_batch_grad(model, x, y):
    """Gradient of the mean loss over the whole global batch in one process (the reference)."""
    model.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def main(out_dir):
    info = D.setup(device="cpu")
    torch.manual_seed(0)  # same data on every rank; each rank then takes its own shard
    x, y = torch.randn(8, 5), torch.randn(8, 3)
    model = torch.nn.Linear(5, 3)
    if D.get_rank() == 1:  # different init: DDP must broadcast rank 0's parameters at wrap time
        torch.nn.init.zeros_(model.weight)
    ddp = D.wrap_model(model, info)
    # Reference computed on an identical copy of rank 0's parameters.
    ref_model = torch.nn.Linear(5, 3)
    ref_model.load_state_dict(D.unwrap_model(ddp).state_dict())
    reference = full_batch_grad(ref_model, x, y)

    # Global batch of 8 = 2 ranks x 2 micro-steps x 2 examples; all-reduce only on the last micro-step.
    shard = D.shard_slice(8)
    xs, ys = x[shard], y[shard]
    ddp.zero_grad()
    grads_after_first = None
    for micro in range(2):
        sync = micro == 1
        with D.maybe_no_sync(ddp, sync):
            loss = torch.nn.functional.mse_loss(ddp(xs[2 * micro:2 * micro + 2]), ys[2 * micro:2 * micro + 2]) / 2
            loss.backward()
        if micro == 0:
            grads_after_first = [p.grad.clone() for p in ddp.parameters()]
    grads = [p.grad for p in ddp.parameters()]

    summed = D.all_reduce_sum({"b": 1.5, "a": float(D.get_rank() + 1)})
    run_dir = D.broadcast_run_dir(f"/runs/rank{D.get_rank()}")
    result = {
        "rank": D.get_rank(), "world_size": D.get_world_size(), "is_main": D.is_main(),
        "summed": summed, "run_dir": run_dir, "shard": [shard.start, shard.stop],
        "grad_max_err": max(float((g - r).abs().max()) for g, r in zip(grads, reference)),
        # no_sync must have skipped the all-reduce: local micro-step grads differ from the global ones
        "first_step_was_local": max(float((g - r).abs().max()) for g, r in zip(grads_after_first, reference)) > 1e-3,
        "weight": D.unwrap_model(ddp).weight.detach().flatten().tolist(),
        "replica_diff": D.max_replica_difference(ddp),
    }
    gathered = D.gather_to_main({"r": torch.tensor([D.get_rank()])})
    result["gathered"] = None if gathered is None else [g["r"].tolist() for g in gathered]
    torch.manual_seed(D.get_rank() + 10)
    result["diverged_diff"] = D.max_replica_difference(torch.nn.Linear(2, 2))
    D.barrier()
    with open(os.path.join(out_dir, f"rank{D.get_rank()}.json"), "w") as fh:
        json.dump(result, fh)
    D.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
