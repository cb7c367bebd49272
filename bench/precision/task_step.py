"""A task's training step in bf16 autocast against fp32, and where each spends its time.

    python -m bench.precision.task_step --task translation --steps 12 --rounds 3 --threads 2

The task's default config (``train.py task=<task>``) builds its data and model once; ``--steps`` training batches
are taken once and replayed, a forward and backward each (the loss as the trainer computes it), in fp32 and under
``torch.autocast("cpu", dtype=torch.bfloat16)`` (what ``trainer.precision=bf16`` runs), alternating every round
with the order flipped, so load from other processes falls on both alike. Prints the wall seconds of each round,
the median ratio fp32 / bf16 and the profiler's top operators of each (torch.profiler, self CPU time). The
optimizer step is left out: it is the same fp32 update in both.
"""
import argparse
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from bench.harness import interleaved, make_timer
from sru.ops.precision import Precision
from tasks.engine.base import build_task
from tasks.engine.train.runner import compose


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="translation")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=8, help="operators listed per precision")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = build_task(compose([f"task={args.task}", "seed=1"]))
    task.setup()
    model = task.build_model().train()
    batches = task.batches("train", 0, 1)
    batches = [next(batches) for _ in range(args.steps)]

    def step(batch, bf16: bool) -> None:
        with (Precision.BF16 if bf16 else Precision.FP32).autocast("cpu"):  # trainer.precision's context
            loss, _ = task.compute_loss(model, batch, "train")
        loss.backward()
        model.zero_grad(set_to_none=True)

    for bf16 in (False, True):  # warm-up: kernel builds, weight packs, allocator
        for batch in batches[:2]:
            step(batch, bf16)

    def round_of(bf16: bool):  # one sample: every batch once
        return lambda: [step(batch, bf16) for batch in batches]
    # wall time (2 threads), the order flipping every round (bench.harness)
    seconds = interleaved({False: round_of(False), True: round_of(True)}, make_timer("cpu"), args.rounds)
    ratio = statistics.median(a / b for a, b in zip(seconds[False], seconds[True]))
    print(f"{args.task}: {args.steps} steps a round, {args.threads} threads; "
          f"fp32 s {[round(s, 2) for s in seconds[False]]}, bf16 s {[round(s, 2) for s in seconds[True]]}; "
          f"fp32 / bf16 (median of rounds) {ratio:.3f}x")
    for bf16 in (False, True):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for batch in batches[: max(1, args.steps // 2)]:
                step(batch, bf16)
        print(f"== {'bf16' if bf16 else 'fp32'}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
