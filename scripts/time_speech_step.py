"""CPU time of one speech training step (forward, CTC, backward, Adam) for each encoder on the real
default batches: a load-robust speed comparison (process CPU seconds, not wall-clock).

    python scripts/time_speech_step.py --models sru,lstm --steps 4 [hydra overrides ...]
"""
from __future__ import annotations

import argparse
import time

import torch

from tasks.engine.registry import build_task
from tasks.engine.runner import compose


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="sru,lstm")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args, overrides = parser.parse_known_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as the trainer does (trainer.flush_denormal)
    for name in args.models.split(","):
        cfg = compose(["task=speech", f"model={name}", *overrides])
        task = build_task(cfg)
        task.setup()
        torch.manual_seed(0)
        model = task.build_model()
        opt = torch.optim.Adam(model.parameters(), 1e-3)
        batches = task.batches("train", epoch=0, seed=0)
        times, frames = [], 0
        for i in range(args.steps + 1):
            batch = next(batches)
            t0 = time.process_time()
            loss, out = task.compute_loss(model, batch, "train")
            (loss / out["sample_size"]).backward()
            opt.step()
            opt.zero_grad()
            if i > 0:  # the first step builds kernels / allocates
                times.append(time.process_time() - t0)
                frames += out["nframes"]
        n = sum(p.numel() for p in model.parameters())
        print(f"{name}: {n / 1e6:.2f}M params, {sum(times) / len(times):.3f} CPU-s per step "
              f"({frames / sum(times):,.0f} frames per CPU-second, {args.threads} thread(s))", flush=True)


if __name__ == "__main__":
    main()
