"""Decoding's attention (sru/ops/cpu/decoding.py ``attend``) against torch's scaled_dot_product_attention, at
beam-search step shapes (6 queries per sentence and head, 4 heads of 64), with the keys and values out of cache
as in a real decode: each call takes the next of ``--sets`` fresh tensor sets (24 x up to 60 MB), in one
process with paired interleaved rounds (bench/harness.py). ``read`` is summing the same keys and values.

    python -m bench.decoding.decode_attention --threads 1 --repeats 7
"""
import itertools

import torch
import torch.nn.functional as F

from bench.harness import (bench_parser, calls_per_sample, interleaved, machine_info, make_timer, markdown_table,
                           paired_ratio, summarize)
from sru.ops.backends import cpu_decoding

HEADS, QUERIES, HEAD_SIZE = 4, 6, 64
SHAPES = [(32, 30, "per query"), (216, 60, "per query"), (216, 120, "per query"), (216, 40, "per key")]


def tensor_sets(sentences, columns, mask_kind, count, g):
    """``count`` fresh (q, k, v, mask) sets; keys and values as views of buffers with room to grow."""
    sets = []
    for _ in range(count):
        q = torch.randn(sentences, HEADS, QUERIES, HEAD_SIZE, generator=g)
        k, v = (torch.randn(sentences, HEADS, columns + 16, HEAD_SIZE, generator=g)[:, :, :columns] for _ in range(2))
        rows = QUERIES if mask_kind == "per query" else 1
        mask = torch.zeros(sentences, 1, rows, columns)
        mask.masked_fill_(torch.rand(mask.shape, generator=g) < 0.3, float("-inf"))
        mask[..., 0] = 0.0
        sets.append((q, k, v, mask))
    return sets


def torch_attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def main(argv=None):
    args = bench_parser(__doc__, threads=1, repeats=7, sets=24).parse_args(argv)
    torch.set_num_threads(args.threads)
    if cpu_decoding.attention_kernel() is None:
        raise SystemExit("decode_attention.cpp is not built with AVX-512 here: nothing to compare")
    timer, g = make_timer("cpu" if args.threads == 1 else "wall"), torch.Generator().manual_seed(0)
    body = []
    for sentences, columns, mask_kind in SHAPES:
        sets = tensor_sets(sentences, columns, mask_kind, args.sets, g)
        turns = {name: itertools.cycle(sets) for name in ("torch", "C kernel", "read")}
        fns = {"torch": lambda: torch_attention(*next(turns["torch"])),
               "C kernel": lambda: cpu_decoding.attend(*next(turns["C kernel"])),
               "read": lambda: [t.sum() for t in next(turns["read"])[1:3]]}
        with torch.no_grad():
            numbers = {k: calls_per_sample(f, timer, min_ms=20, warmup=3) for k, f in fns.items()}
            stats = {k: summarize(v) for k, v in interleaved(fns, timer, args.repeats, numbers).items()}
        body.append([f"{sentences} x {columns} ({mask_kind} mask)", *(f"{stats[k]['median_ms']:.3f}" for k in fns),
                     f"{paired_ratio(stats['torch'], stats['C kernel']):.2f}×"])
        del sets
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, {args.threads} threads, torch "
          f"{info['torch']}; ms per call (median), {HEADS} heads x {QUERIES} queries x {HEAD_SIZE}; "
          f"`{info['command']}`\n")
    print(markdown_table(["sentences x key columns", "torch", "C kernel", "read", "C kernel faster (paired)"],
                         body, "lrrrr"))


if __name__ == "__main__":
    main()
