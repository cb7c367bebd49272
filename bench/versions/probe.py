"""One process of ``bench.versions``: time the workloads of whichever ``sru`` is first on PYTHONPATH and
print one JSON line {workload: seconds per call}. Run as a script (``python bench/versions/probe.py``),
never imported from the tree under test: it imports nothing of bench/, so an old tree without this
file is measured by the same code as the new one.
"""
import json
import sys
import time

import torch
from torch.nn.utils.rnn import pack_padded_sequence

WIDTH, LAYERS, LENGTH, BATCH = 512, 2, 64, 32


def per_call(fn, min_s: float, samples: int = 3) -> float:
    """Seconds per call: the least of ``samples`` samples, each enough calls to last ``min_s`` (this
    thread's CPU time: time descheduled by other processes is not counted)."""
    for _ in range(3):
        fn()
    start = time.thread_time()
    fn()
    calls = max(1, int(min_s / max(time.thread_time() - start, 1e-6)))
    best = float("inf")
    for _ in range(samples):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time() - start) / calls)
    return best


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
    min_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
    import sru
    result = {"sru": sru.__file__}
    for name, fn in workloads().items():
        result[name] = per_call(fn, min_s)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
