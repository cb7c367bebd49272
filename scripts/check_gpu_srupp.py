"""One prepared SRU++ check for a GPU machine (about a minute on one GPU).

    PYTHONPATH=. python scripts/check_gpu_srupp.py [--device cuda] [--out outputs/check_gpu_srupp]
    PYTHONPATH=. python scripts/check_gpu_srupp.py --device cpu --speed-shape 16,2,32,8,2   # CPU smoke test

Writes summary.json into --out; exit status 1 if a correctness check fails. What it checks:
bench/srupp_check.py.
"""
import sys

from bench.srupp_check import main

if __name__ == "__main__":
    sys.exit(main())
