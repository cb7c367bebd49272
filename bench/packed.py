"""Packed vs padded SRU (and nn.LSTM on the same PackedSequence): forward + backward on CPU.

(``python -m bench.packed``)

A batch of ``--batch`` sequences with lengths uniform in [L/4, L] (so about 3/8 of the padded
positions are padding), a bidirectional stack with ``--size`` input and output features
(hidden ``size/2`` per direction). Timed: one training step, forward plus backward into the
parameters and the input, for

- ``sru_padded``: SRU on the (L, B, d) padded tensor with ``mask_pad``;
- ``sru_packed``: SRU on the PackedSequence (N real tokens only, sru/packed.py);
- ``lstm_packed``: nn.LSTM (same layers, sizes, bidirectional) on the same PackedSequence.

Candidates run round-robin within each repeat (the order rotates), so load drifting during
the run hits all alike; every ratio is the median over repeats of that repeat's ratio. Prints
a Markdown table (docs/speed/packed.md records it).
"""
import statistics

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

import sru
from bench.harness import bench_parser, interleaved, make_timer, markdown_table, paired_ratio
from tasks.engine.run.devices import cpu_model


def parse_args(argv=None):
    parser = bench_parser(__doc__, threads=2, repeats=15, length=128, batch=32, size=512, layers=2, warmup=2, seed=0)
    return parser.parse_args(argv)


def make_batch(length: int, batch: int, size: int, seed: int):
    """Padded input (L, B, d), its mask_pad and lengths, and the same batch packed."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 4, length + 1, (batch,), generator=gen)
    lengths[0] = length  # the padded tensor is exactly L long
    x = torch.randn(length, batch, size, generator=gen)
    mask_pad = torch.arange(length).unsqueeze(1) >= lengths.unsqueeze(0)
    x = x.masked_fill(mask_pad.unsqueeze(-1), 0.0)
    return x, mask_pad, lengths, pack_padded_sequence(x, lengths, enforce_sorted=False)


def candidates(args, x, mask_pad, packed):
    torch.manual_seed(args.seed)
    model = sru.SRU(args.size, args.size // 2, num_layers=args.layers, bidirectional=True)
    lstm = nn.LSTM(args.size, args.size // 2, num_layers=args.layers, bidirectional=True)

    def sru_padded():
        inp = x.detach().requires_grad_()
        h, c = model(inp, mask_pad=mask_pad)
        (h.sum() + c.sum()).backward()

    def sru_packed():
        inp = packed.data.detach().requires_grad_()
        h, c = model(packed._replace(data=inp))
        (h.data.sum() + c.sum()).backward()

    def lstm_packed():
        inp = packed.data.detach().requires_grad_()
        h, (hn, cn) = lstm(packed._replace(data=inp))
        (h.data.sum() + cn.sum()).backward()

    return {"sru_padded": sru_padded, "sru_packed": sru_packed, "lstm_packed": lstm_packed}


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    x, mask_pad, lengths, packed = make_batch(args.length, args.batch, args.size, args.seed)
    fns = candidates(args, x, mask_pad, packed)
    for fn in fns.values():
        for _ in range(args.warmup):
            fn()
    samples = interleaved(fns, make_timer("cpu"), args.repeats)  # one training step per sample
    tokens, padded = int(lengths.sum()), args.length * args.batch
    print(f"# packed vs padded, fwd+bwd, CPU {args.threads} threads, torch {torch.__version__}, {cpu_model()}")
    print(f"L={args.length} B={args.batch} d={args.size} layers={args.layers} bidirectional; "
          f"lengths uniform in [{args.length // 4}, {args.length}]: {tokens} real tokens of "
          f"{padded} padded positions ({100 * (1 - tokens / padded):.0f}% padding); "
          f"{args.repeats} repeats\n")
    rows = []
    for name, seconds in samples.items():
        ms = [1e3 * s for s in seconds]
        q = statistics.quantiles(ms, n=4)
        rows.append([name, f"{statistics.median(ms):.1f}", f"{q[0]:.1f}-{q[2]:.1f}",
                     f"{paired_ratio(samples['sru_padded'], seconds):.2f}x"])
    print(markdown_table(["candidate", "median ms", "IQR ms", "sru_padded / candidate"], rows, align="lrrr"))
    lstm_ratio = paired_ratio(samples["lstm_packed"], samples["sru_packed"])
    print(f"\nsru_packed is {lstm_ratio:.2f}x faster than lstm_packed (median of per-repeat ratios)")


if __name__ == "__main__":
    main()
