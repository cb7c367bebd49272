"""A worker of ``bench.versions``: builds the workloads with whichever ``sru`` is first on PYTHONPATH, prints
one JSON line {workload: calls per sample}, then for every workload name read from stdin times one
sample and prints its seconds per call. Run as a script (``python bench/versions/probe.py``), never
imported from the tree under test: it imports nothing of bench/, so an old tree without this file is
measured by the same code as the new one.
"""
import json
import sys
import time

import torch
from torch.nn.utils.rnn import pack_padded_sequence

WIDTH, LAYERS, LENGTH, BATCH = 512, 2, 64, 32


def calls_for(fn, min_s: float) -> int:
    """Calls that make a sample last about ``min_s`` of this thread's CPU time, after a warm-up."""
    for _ in range(3):
        fn()
    start = time.thread_time()
    fn()
    return max(1, int(min_s / max(time.thread_time() - start, 1e-6)))


def sample(fn, calls: int) -> float:
    """Seconds per call over ``calls`` calls, in this thread's CPU time (descheduled time not counted)."""
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls


def no_grad(fn):
    def run():
        with torch.no_grad():
            fn()
    return run


def decode_steps(gen: torch.Generator) -> dict:
    """One step of the SRU stack (state carried) and of SRU++ (cache carried, a 64-position window)."""
    from sru import SRU, SRUpp
    from sru.srupp_decode import decode

    steps = {}
    for batch in (1, 32):
        step_x, c0 = torch.randn(1, batch, WIDTH, generator=gen), torch.zeros(LAYERS, batch, WIDTH)
        sru = SRU(WIDTH, WIDTH, num_layers=LAYERS).eval()
        state = [c0]

        def sru_step(m=sru, s=step_x, box=state):
            _, box[0] = m(s, box[0])
        steps[f"decode step B={batch}"] = no_grad(sru_step)
        srupp = SRUpp(WIDTH, WIDTH, proj_size=128, num_layers=LAYERS).eval()
        with torch.no_grad():
            _, cache = decode(srupp, torch.randn(64, batch, WIDTH, generator=gen))
        held = [cache]

        def srupp_step(m=srupp, s=step_x[0], box=held):
            _, box[0] = decode(m, s, box[0], max_context=64)
        steps[f"SRU++ decode step B={batch}"] = no_grad(srupp_step)
    return steps


def workloads() -> dict:
    """fp32 training and inference of a 2 x 512 stack at L=64 B=32, a packed bidirectional training step,
    int8 inference (``sru.quantize.quantize_dynamic``), and the decode steps."""
    from sru import SRU
    from sru.quantize import quantize_dynamic

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(LENGTH, BATCH, WIDTH, generator=gen)
    model, train_x = SRU(WIDTH, WIDTH, num_layers=LAYERS), x.clone().requires_grad_(True)
    bidir = SRU(WIDTH, WIDTH, num_layers=LAYERS, bidirectional=True)
    lengths = torch.randint(LENGTH // 4, LENGTH + 1, (BATCH,), generator=gen)
    packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
    packed = packed._replace(data=packed.data.clone().requires_grad_(True))  # a leaf, as in training
    plain = SRU(WIDTH, WIDTH, num_layers=LAYERS).eval()
    int8 = quantize_dynamic(SRU(WIDTH, WIDTH, num_layers=LAYERS).eval())

    def train():
        model.zero_grad(set_to_none=True)
        model(train_x)[0].sum().backward()

    def train_packed():
        bidir.zero_grad(set_to_none=True)
        bidir(packed)[0].data.sum().backward()

    return {"fp32 training step": train, "fp32 inference": no_grad(lambda: plain(x)),
            "packed training step (bidir)": train_packed, "int8 inference": no_grad(lambda: int8(x)),
            **decode_steps(gen)}


def main() -> None:
    torch.set_num_threads(1)
    min_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
    fns = workloads()
    calls = {name: calls_for(fn, min_s) for name, fn in fns.items()}
    print(json.dumps(calls), flush=True)
    for line in sys.stdin:
        name = line.strip()
        print(json.dumps(sample(fns[name], calls[name])), flush=True)


if __name__ == "__main__":
    main()
