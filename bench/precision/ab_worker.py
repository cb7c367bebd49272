"""The worker of ``bench.precision.ab``: run by path with ``PYTHONPATH`` at one checkout, it builds the SRU
candidates from that checkout's public API only (``sru.SRU``, ``sru.quantize_dynamic``, ``sru.to_precision``
where it exists) and answers, one line each on stdin/stdout:

    build THREADS        -> the candidate names, comma-separated
    time NAME CALLS      -> this thread's CPU seconds per call of NAME, CALLS times in a row

bf16 inference runs the way that checkout's commands run it: ``sru.to_precision(model, "bf16")`` where it
exists, else under ``torch.autocast`` (the commands before it). Training runs under autocast in both.
"""
import copy
import sys
import time

import torch

import sru

L, B, D, LAYERS = 64, 32, 512, 2


def _inference(model, x):
    def run():
        with torch.no_grad():
            model(x)
    return run


def _autocast_inference(model, x):
    def run():
        with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
            model(x)
    return run


def _step(model, x, autocast):
    def run():
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            h = model(x)[0]
        h.float().sum().backward()
    return run


def candidates():
    torch.manual_seed(0)
    base = sru.SRU(D, D, num_layers=LAYERS).eval()
    int8 = sru.quantize_dynamic(base)
    x, x1 = torch.randn(L, B, D), torch.randn(1, 1, D)
    if hasattr(sru, "to_precision"):
        bf16 = sru.to_precision(base, "bf16")
        bf16_run, bf16_step = _inference(bf16, x), _inference(bf16, x1)
    else:
        bf16_run, bf16_step = _autocast_inference(base, x), _autocast_inference(base, x1)
    train = copy.deepcopy(base).train()
    return {"fp32": _inference(base, x), "int8": _inference(int8, x), "bf16": bf16_run,
            "decode fp32": _inference(base, x1), "decode int8": _inference(int8, x1), "decode bf16": bf16_step,
            "train fp32": _step(train, x, False), "train bf16 (autocast)": _step(train, x, True)}


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
