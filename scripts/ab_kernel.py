"""A/B timing of two builds of the fused CPU recurrence kernel (sru/ops/cpu/sru_recurrence.cpp):
the forward and backward of each, compiled side by side with the flags build.py uses, on the same inputs.

    git show HEAD~1:sru/ops/cpu/sru_recurrence.cpp > /tmp/old.cpp
    python scripts/ab_kernel.py /tmp/old.cpp sru/ops/cpu/sru_recurrence.cpp
    python scripts/ab_kernel.py /tmp/old.cpp sru/ops/cpu/sru_recurrence.cpp --threads 2 --after-matmul

Both sources must share the current headers (sru_args.h: the struct the Python mirror describes).
The method (shapes, clocks, --after-matmul): bench/cpu_kernel.py (``ab_builds``).
"""
import argparse
from pathlib import Path

from bench.cpu_kernel import ab_builds


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
    ab_builds(opts.old, opts.new, opts.rounds, opts.threads, opts.after_matmul)


if __name__ == "__main__":
    main()
