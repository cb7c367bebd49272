"""SRU++ speed: this repository's sru.SRUpp vs the official sru==3.0.0.dev6 SRUpp (same weights,
one process) vs an nn.TransformerEncoderLayer stack of equal width.

    pip install --no-deps --target /tmp/sru3 sru==3.0.0.dev6
    PYTHONPATH=. python scripts/bench_srupp.py --official /tmp/sru3 [--threads 2] [--repeats 10]
                                               [--threads 1 --timer cpu]   (a shared machine)

Writes srupp.json and srupp.md into --out. The method and every option: bench/srupp.py (``--help``).
"""
import sys

from bench.srupp import main

if __name__ == "__main__":
    sys.exit(main() and 0)
