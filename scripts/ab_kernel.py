"""A/B timing of two builds of the fused CPU recurrence kernel (sru/ops/cpu/sru_recurrence.cpp):
the forward of each, compiled side by side with the flags build.py uses, on the same inputs.

    git show HEAD~1:sru/ops/cpu/sru_recurrence.cpp > /tmp/old.cpp
    python scripts/ab_kernel.py /tmp/old.cpp sru/ops/cpu/sru_recurrence.cpp
    python scripts/ab_kernel.py /tmp/old.cpp sru/ops/cpu/sru_recurrence.cpp --threads 2 --after-matmul

Both sources must share the current headers (sru_args.h: the struct the Python mirror describes).
Rounds are interleaved; the speedup is the median over rounds of old/new. Per shape: the forward
in inference (states not stored) and in training (every step's c stored), and the backward;
k = 3, skip term on, unidirectional unless the shape says x2.

Default: one thread, this thread's CPU time (robust to other processes), the kernel called
back to back (its inputs hot in cache). --after-matmul: before every timed call, x @ W writes U,
as in a real layer, so the kernel finds U where the matmul's threads left it; then each call is
timed alone, by the wall clock (with --threads > 1 the work is on several threads, which the
calling thread's CPU time would not see).
"""
import argparse
import ctypes
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from sru.ops.cpu.build import compile_flags
from sru.ops.cpu.kernel import SruArgs, configure_library

HEADERS = Path(__file__).resolve().parents[1] / "sru" / "ops" / "cpu"
SHAPES = [(32, 32, 256, 1), (64, 32, 512, 1), (128, 32, 512, 1), (256, 8, 1024, 1), (35, 32, 910, 1),
          (64, 32, 512, 2), (32, 8, 256, 1), (32, 2, 256, 1), (1, 32, 512, 1), (1, 1, 512, 1)]  # (L, B, d, dirs)


def build(source: Path, out: Path) -> ctypes.CDLL:
    subprocess.run(["g++", *compile_flags(), "-shared", "-fPIC", f"-I{HEADERS}", str(source), "-o", str(out)],
                   check=True)
    return configure_library(ctypes.CDLL(str(out)))


def per_call_us(entry, args: SruArgs, calls: int) -> float:
    """Back to back, this thread's CPU time."""
    start = time.thread_time()
    for _ in range(calls):
        entry(ctypes.byref(args))
    return (time.thread_time() - start) / calls * 1e6


def after_matmul_us(entry, args: SruArgs, x: torch.Tensor, weight: torch.Tensor, U: torch.Tensor) -> float:
    """One call right after x @ W has written U, wall clock."""
    torch.mm(x, weight, out=U)
    start = time.perf_counter()
    entry(ctypes.byref(args))
    return (time.perf_counter() - start) * 1e6


def backward_buffers(L: int, B: int, D: int, c_all: torch.Tensor) -> dict:
    """The backward's inputs beyond the forward's (the stored c of a forward run) and outputs."""
    return {"c_all": c_all, "grad_h": torch.randn(L * B, D), "grad_U": torch.empty(L * B, 3 * D),
            "grad_x": torch.empty(L * B, D), "grad_weight_c": torch.empty(2 * D), "grad_bias": torch.empty(2 * D),
            "grad_partial": torch.empty(B, 4, D), "grad_c0": torch.empty(B, D)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="kernel and matmul threads")
    parser.add_argument("--after-matmul", action="store_true", help="time each call right after x @ W wrote U")
    opts = parser.parse_args()
    if opts.threads > 1 and not opts.after_matmul:
        parser.error("--threads > 1 needs --after-matmul (wall-clock timing of single calls)")
    torch.set_num_threads(opts.threads)
    rounds = opts.rounds * (4 if opts.after_matmul else 1)  # single calls: more samples
    with tempfile.TemporaryDirectory() as tmp:
        libs = {"old": build(opts.old, Path(tmp) / "old.so"), "new": build(opts.new, Path(tmp) / "new.so")}
        how = (f"{opts.threads} thread(s), right after x @ W, wall clock" if opts.after_matmul
               else "1 thread, back to back, thread CPU time")
        print(f"{how}, {rounds} interleaved rounds\n")
        print("| shape | mode | old µs | new µs | speedup (median of old/new) |\n|---|---|---|---|---|")
        for L, B, d, dirs in SHAPES:
            D = dirs * d
            U, x, h = torch.randn(L * B, 3 * D), torch.randn(L * B, D), torch.empty(L * B, D)
            weight = torch.randn(D, 3 * D) / D ** 0.5
            weight_c, bias, c_last = torch.randn(2 * D), torch.randn(2 * D), torch.empty(B, D)
            for mode in ("inference", "training", "backward"):
                c_all = torch.empty(L * B, D) if mode != "inference" else None
                args = SruArgs(length=L, batch=B, num_threads=opts.threads, hidden=d, dirs=dirs, k=3, skip_mode=1,
                               scale_x=1.0, U=U.data_ptr(), x=x.data_ptr(), weight_c=weight_c.data_ptr(),
                               bias=bias.data_ptr(), h=h.data_ptr(), c_last=c_last.data_ptr(),
                               c_all=None if c_all is None else c_all.data_ptr())
                entry = {name: lib.sru_forward_f32 for name, lib in libs.items()}
                if mode == "backward":
                    libs["old"].sru_forward_f32(ctypes.byref(args))  # the states the backward reads
                    buffers = backward_buffers(L, B, D, c_all)
                    for name, tensor in buffers.items():
                        setattr(args, name, tensor.data_ptr())
                    entry = {name: lib.sru_backward_f32 for name, lib in libs.items()}
                calls = max(3, int(2e7 / (L * B * D)))
                times = {name: [] for name in libs}
                for r in range(rounds):
                    for name in (list(libs) if r % 2 == 0 else list(libs)[::-1]):
                        times[name].append(after_matmul_us(entry[name], args, x, weight, U) if opts.after_matmul
                                           else per_call_us(entry[name], args, calls))
                speedup = statistics.median(o / n for o, n in zip(times["old"], times["new"]))
                print(f"| L={L} B={B} d={d}{' x2 directions' if dirs == 2 else ''} | {mode} | "
                      f"{statistics.median(times['old']):.1f} | {statistics.median(times['new']):.1f} | "
                      f"{speedup:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
