"""Layer speed benchmark: SRU (every backend) vs nn.LSTM, kernel-3 conv1d and the GEMM bound.

    python scripts/bench_speed.py [--device cpu|cuda] [--threads 2] [--repeats N]
                                  [--shapes paper|judged|all|tiny] [--dtypes fp32,bf16]
                                  [--out DIR] [--profile]
    python scripts/bench_speed.py --decode [--official DIR]   (one-step decoding latency)

Writes bench.json, bench.md and speed.png (decode.json and decode.md with --decode) into --out.
The method and every option: bench/speed.py (``--help``). The ``sru`` benchmarked is the one Python
imports (the checkout's with `pip install -e .` or `PYTHONPATH=.`); the run prints its path.
"""
from bench.speed import main

if __name__ == "__main__":
    main()
