"""Microbenchmark: the fused CPU recurrence against the GEMMs of the same SRU layer.

    python scripts/bench_cpu_kernel.py [--length 64] [--batch 32] [--width 512] [--threads 2]

What is timed and reported: bench/cpu_kernel.py (``kernel_vs_gemm``).
"""
from bench.cpu_kernel import kernel_vs_gemm
from bench.harness import bench_parser


def main() -> None:
    args = bench_parser(__doc__, threads=2, repeats=30, length=64, batch=32, width=512).parse_args()
    kernel_vs_gemm(args.length, args.batch, args.width, args.threads, args.repeats)


if __name__ == "__main__":
    main()
