"""Interleaved training-step timing of classification models on identical MR batches.

    python scripts/time_classification.py --models sru,lstm,cnn --steps 30 \
        experiment=paper/classification_mr_{model} task.data.min_freq=2

Every model is built from the config train.py would compose and fed the same training batches; one step
(forward, backward, optimizer step) of each model runs in turn (round-robin), so load from other
processes on a shared machine hits all models alike. Prints the median ms per step and the implied
training seconds per epoch (median step x batches per epoch), and the ratio to the first model.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from tasks.engine.runner import compose


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", required=True, help="comma-separated names substituted for {model}")
    p.add_argument("--steps", type=int, default=30, help="timed steps per model (after 3 warm-up steps)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("overrides", nargs="*")
    args = p.parse_args(argv)
    from tasks.engine.optim import build_optimizer
    from tasks.engine.registry import build_task

    torch.set_num_threads(args.threads)
    names = args.models.split(",")
    runs = []
    for name in names:
        cfg = compose([o.replace("{model}", name) for o in args.overrides])
        torch.manual_seed(0)
        task = build_task(cfg)
        task.setup()
        model = task.build_model().train()
        runs.append((name, task, model, build_optimizer(model.parameters(), cfg.trainer.optimizer)))
    # the same batches for every model (the vocabulary is the same: same data config)
    batches = list(runs[0][1].batches("train", epoch=0, seed=0))[: args.steps + 3]
    times = {name: [] for name in names}
    for i, batch in enumerate(batches):
        for name, task, model, opt in runs:
            t0 = time.perf_counter()
            loss, _ = task.compute_loss(model, batch, "train")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if i >= 3:
                times[name].append(time.perf_counter() - t0)
    n_batches = runs[0][1].num_batches("train")
    base = statistics.median(times[names[0]])
    print(f"| model | ms/step (median of {args.steps}) | implied train s/epoch ({n_batches} steps) | vs {names[0]} |")
    print("|---|---|---|---|")
    for name in names:
        med = statistics.median(times[name])
        print(f"| {name} | {1e3 * med:.1f} | {med * n_batches:.1f} | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
