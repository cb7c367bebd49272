"""Microbenchmark: the fused CPU recurrence against the GEMMs of the same SRU layer.

    python scripts/bench_cpu_kernel.py [--length 64] [--batch 32] [--width 512] [--threads 2]

Times, interleaved in one loop so machine noise hits all alike, for one unidirectional
layer with k = 3: the forward GEMM x @ W, the two backward GEMMs, the recurrence forward
without (inference) and with the stored states (training), and its backward. Reports
median and minimum per call, and the recurrence's cost as a fraction of the GEMMs:
the layer can only be as close to its GEMM bound as these fractions allow.
"""
import argparse
import statistics
import time

import torch

from sru.ops.cpu.autograd import SKIP_SCALED_X, recurrence_bwd, recurrence_fwd
from sru.ops.cpu.build import load_error, load_library


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    if load_library() is None:
        raise SystemExit(f"the fused CPU kernel is unavailable: {load_error()}")
    torch.set_num_threads(args.threads)
    L, B, D = args.length, args.batch, args.width
    g = torch.Generator().manual_seed(0)
    x = torch.randn(L * B, D, generator=g)
    W = torch.randn(D, 3 * D, generator=g) / D ** 0.5
    U = (x @ W).view(L, B, 3 * D)
    weight_c, bias = torch.randn(2 * D, generator=g), torch.zeros(2 * D)
    grad_U, grad_h = torch.randn(L * B, 3 * D, generator=g), torch.randn(L, B, D, generator=g)

    def fwd(store_c):
        return recurrence_fwd(U, x.view(L, B, D), weight_c, bias, None, None, None, D, False,
                              SKIP_SCALED_X, False, 1.0, store_c)

    c_all = fwd(True)[2]
    cases = {
        "gemm fwd": lambda: x @ W,
        "gemm bwd (2 GEMMs)": lambda: (grad_U @ W.t(), x.t() @ grad_U),
        "recurrence fwd, inference": lambda: fwd(False),
        "recurrence fwd, training": lambda: fwd(True),
        "recurrence bwd": lambda: recurrence_bwd(grad_h, None, U, x.view(L, B, D), weight_c,
                                                 bias, None, None, None, c_all, D, False,
                                                 SKIP_SCALED_X, False, 1.0, False),
    }
    times = {name: [] for name in cases}
    for fn in cases.values():  # warm-up: page in buffers, start threads
        fn()
    for _ in range(args.repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)

    print(f"L={L} B={B} d={D}, {args.threads} threads, {args.repeats} interleaved repeats")
    for stat in (statistics.median, min):
        t = {name: stat(v) for name, v in times.items()}
        print(f"{stat.__name__:>6}: " + ", ".join(f"{n} {v:.2f} ms" for n, v in t.items()))
        gemm_train = t["gemm fwd"] + t["gemm bwd (2 GEMMs)"]
        rec_train = t["recurrence fwd, training"] + t["recurrence bwd"]
        rec_inference = t["recurrence fwd, inference"]
        print(f"        inference: recurrence / GEMM = {rec_inference / t['gemm fwd']:.3f}; "
              f"training: recurrence fwd+bwd / 3 GEMMs = {rec_train / gemm_train:.3f}")


if __name__ == "__main__":
    main()
