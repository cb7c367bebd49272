"""Where SRU inference time goes at a small shape (the paper's L=32, B=32, d=256, one layer).

    python scripts/profile_small_shape.py

One thread, this thread's CPU time (robust to other processes on a shared machine), 25 interleaved
rounds: the forward against its matmul (the GEMM bound), and each part of the difference timed on
its own: the fused kernel call (the recurrence), the allocation of h, the eligibility check.
torch.profiler cannot show this split: the kernel is a ctypes call, not an aten op.
"""
import ctypes
import statistics
import time

import torch

from sru import SRU
from sru.dispatch import inference_plan
from sru.ops.cpu.build import load_library
from sru.ops.cpu.kernel import SruArgs

L, B, D = 32, 32, 256
ROUNDS, CALLS = 25, 50


def per_call_us(fn, calls: int = CALLS) -> float:
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls * 1e6


def main() -> None:
    torch.set_num_threads(1)
    rnn = SRU(D, D, num_layers=1).eval()
    cell = rnn.rnn_lst[0]
    x = torch.randn(L, B, D)
    rows = x.view(-1, D)
    weight, weight_c, bias = cell.weight.detach(), cell.weight_c.detach(), cell.bias.detach()
    lib = load_library()
    with torch.inference_mode():
        # The kernel's arguments for one precomputed U, as sru/ops/cpu/inference.py fills them.
        U, h, c_last = rows.mm(weight), torch.empty(L * B, D), torch.empty(B, D)
        args = SruArgs(length=L, batch=B, num_threads=1, hidden=D, dirs=1, k=3, skip_mode=1,
                       scale_x=cell._skip_scale, U=U.data_ptr(), x=x.data_ptr(),
                       weight_c=weight_c.data_ptr(), bias=bias.data_ptr(), h=h.data_ptr(),
                       c_last=c_last.data_ptr())
        parts = {"matmul (the bound)": lambda: rows.mm(weight),
                 "SRU forward": lambda: rnn(x),
                 "kernel call alone": lambda: lib.sru_forward_f32(ctypes.byref(args)),
                 "h allocation (new_empty)": lambda: x.new_empty(L * B, D),
                 "eligibility check (inference_plan)": lambda: inference_plan(rnn.rnn_lst, x)}
        for fn in parts.values():  # warm-up
            per_call_us(fn, 20)
        samples = {name: [] for name in parts}
        for _ in range(ROUNDS):
            for name, fn in parts.items():
                samples[name].append(per_call_us(fn))
    bound = samples["matmul (the bound)"]
    print(f"torch {torch.__version__}, 1 thread, thread CPU time, median of {ROUNDS} interleaved rounds")
    for name, values in samples.items():
        share = statistics.median(a / b for a, b in zip(values, bound))
        print(f"  {name:36s} {statistics.median(values):9.1f} us   {100 * share:6.1f}% of the matmul")


if __name__ == "__main__":
    main()
