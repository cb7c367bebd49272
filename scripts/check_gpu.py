"""One prepared check for a short time on a GPU machine (about 5 minutes on one GPU).

    python scripts/check_gpu.py [--out outputs/check_gpu] [--skip-bench] [--bench-timeout 420]
    TRITON_INTERPRET=1 python scripts/check_gpu.py --dry-run-cpu   # smoke-test this script

Correctness of the Triton recurrence on the GPU, its memory bandwidth, then scripts/bench_speed.py;
everything goes to --out (correctness.json, bandwidth.json, summary.md, bench/). Exit status 1 if a
correctness check fails. What it checks: bench/gpu_check.py.
"""
from bench.gpu_check import main

if __name__ == "__main__":
    main()
