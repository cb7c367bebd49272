"""Microbenchmark: the fused CPU recurrence against the GEMMs of the same SRU layer.

    python scripts/bench_cpu_kernel.py [--length 64] [--batch 32] [--width 512] [--threads 2]

What is timed and reported: bench/cpu_kernel.py (``kernel_vs_gemm``).
"""
import argparse

from bench.cpu_kernel import kernel_vs_gemm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    kernel_vs_gemm(args.length, args.batch, args.width, args.threads, args.repeats)


if __name__ == "__main__":
    main()
