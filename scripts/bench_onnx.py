"""ONNX Runtime vs PyTorch CPU inference latency of an exported SRU stack.

    python scripts/bench_onnx.py [--size 512] [--layers 2] [--threads 2] [--repeats 15]
                                 [--out outputs/bench_onnx]

Needs the export extra (``pip install -e ".[export]"``). Prints a Markdown table and the largest
output difference. The method: bench/onnx_speed.py.
"""
from bench.onnx_speed import main

if __name__ == "__main__":
    main()
