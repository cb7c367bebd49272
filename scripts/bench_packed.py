"""Packed vs padded SRU (and nn.LSTM on the same PackedSequence): forward + backward on CPU.

    python scripts/bench_packed.py [--length 128] [--batch 32] [--size 512] [--layers 2]
                                   [--threads 2] [--repeats 15] [--seed 0]

Prints a Markdown table (docs/speed/packed.md records it). The method: bench/packed.py.
"""
from bench.packed import main

if __name__ == "__main__":
    main()
