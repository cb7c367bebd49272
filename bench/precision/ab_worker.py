"""The worker of ``bench.precision.ab``: run by path with ``PYTHONPATH`` at one checkout, it builds the SRU
candidates the way that checkout's commands run them (``tasks.engine.inference.precision.apply_precision`` and
the run's ``autocast`` from ``tasks.engine.run.devices``: predict.py / evaluate.py ``precision=``, and the
trainer's ``trainer.precision``) and answers, one line each on stdin/stdout:

    build THREADS        -> the candidate names, comma-separated
    time NAME CALLS      -> this thread's CPU seconds per call of NAME, CALLS times in a row
"""
import copy
import sys
import time

import torch

import sru
from sru.ops.precision import Precision
from tasks.engine.inference.precision import apply_precision
from tasks.engine.run.devices import autocast

L, B, D, LAYERS = 64, 32, 512, 2
CPU = torch.device("cpu")


def _inference(base, precision: Precision, x):
    model, under = apply_precision(base, precision, CPU)

    def run():
        with torch.no_grad(), autocast(CPU, under):
            model(x)
    return run


def _step(model, x, precision: str):
    def run():
        model.zero_grad(set_to_none=True)
        with autocast(CPU, precision):
            h = model(x)[0]
        h.float().sum().backward()
    return run


def candidates():
    torch.manual_seed(0)
    base = sru.SRU(D, D, num_layers=LAYERS).eval()
    x, x1 = torch.randn(L, B, D), torch.randn(1, 1, D)
    fns = {}
    for p in (Precision.FP32, Precision.INT8, Precision.BF16):
        fns[p.value], fns[f"decode {p.value}"] = _inference(base, p, x), _inference(base, p, x1)
    train = copy.deepcopy(base).train()
    fns.update({"train fp32": _step(train, x, "fp32"), "train bf16": _step(train, x, "bf16")})
    return fns


def main():
    fns = {}
    for line in sys.stdin:
        words = line.split()
        if words[0] == "build":
            torch.set_num_threads(int(words[1]))
            fns = candidates()
            for fn in fns.values():
                fn()
            print(",".join(fns), flush=True)
        elif words[0] == "time":
            name, calls = " ".join(words[1:-1]), int(words[-1])
            start = time.thread_time()
            for _ in range(calls):
                fns[name]()
            print((time.thread_time() - start) / calls, flush=True)


if __name__ == "__main__":
    main()
