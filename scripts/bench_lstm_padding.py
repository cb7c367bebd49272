"""Which LSTM is the fastest exact baseline for padded batches on this machine?

    PYTHONPATH=$PWD python scripts/bench_lstm_padding.py [--repeats 7] [--threads 2] [--json out.json]

Times one training step (forward + backward of a sum of the outputs) of a stacked LSTM over a right-padded
batch, per candidate, in CPU milliseconds of this process (all threads: robust to other load on a shared
machine; use --threads 1 there), candidates interleaved within each repeat; prints the median, the speedup over per-layer packing, and the largest output difference from packing on the real
(non-padded) steps ("exact" = below 1e-5 in float32):

- packed_per_layer: pack_padded_sequence around each layer's nn.LSTM (LSTMEncoder padding_mode="packed")
- packed_multilayer: one multi-layer nn.LSTM call on one packed batch (no per-layer outputs: DrQA needs them)
- reverse_per_layer: unpacked, each sequence's real part reversed for the backward direction
  (LSTMEncoder's default, padding_mode="reverse")
- bucketed_reverse: sequences sorted by length into 4 buckets, each cut to its longest, reverse_per_layer on
  each (LSTMEncoder's CPU default, padding_mode="bucketed")
- unpacked_ignore_padding: one multi-layer call that reads the padding (NOT exact: the floor of the cost)
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from tasks.common.rnn_encoders import LSTMEncoder

SHAPES = {  # name: (max length, min length, batch, input width, hidden, layers, bidirectional)
    "squad_doc": (120, 30, 32, 300, 128, 3, True),      # DrQA document encoder (3 x 128 bi)
    "speech": (200, 100, 16, 240, 128, 3, True),        # stacked log-mel frames
    "classification": (50, 5, 32, 300, 128, 2, False),  # MR sentences, last-state LSTM
}


def batch(shape, seed=0):
    max_len, min_len, b, d_in, *_ = shape
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (b,), generator=gen)
    lengths[0] = max_len
    x = torch.randn(max_len, b, d_in, generator=gen)
    mask = torch.arange(max_len).unsqueeze(1) >= lengths.unsqueeze(0)
    return x, mask, lengths


def candidates(shape):
    _, _, _, d_in, hidden, layers, bi = shape
    torch.manual_seed(0)
    enc = LSTMEncoder(d_in, hidden, layers, bidirectional=bi).train()
    multi = nn.LSTM(d_in, hidden, layers, bidirectional=bi).train()
    with torch.no_grad():  # the same weights as enc, so outputs can be compared
        for i, layer in enumerate(enc.layers):
            for name, p in layer.named_parameters():
                getattr(multi, name.replace("_l0", f"_l{i}")).copy_(p)

    def per_layer(mode):
        def run(x, mask, lengths):
            enc.padding_mode = mode
            return enc(x, mask_pad=mask)[0]
        return run

    def packed_multilayer(x, mask, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        return nn.utils.rnn.pad_packed_sequence(multi(packed)[0], total_length=x.size(0))[0]

    def ignore_padding(x, mask, lengths):
        return multi(x)[0]

    return {"packed_per_layer": per_layer("packed"), "packed_multilayer": packed_multilayer,
            "reverse_per_layer": per_layer("reverse"), "bucketed_reverse": per_layer("bucketed"),
            "unpacked_ignore_padding": ignore_padding}


def train_step_ms(fn, x, mask, lengths):
    x = x.clone().requires_grad_(True)
    t0 = time.process_time()
    fn(x, mask, lengths).sum().backward()
    return (time.process_time() - t0) * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median CPU ms of {args.repeats} train steps")
    for name in args.shapes.split(","):
        shape = SHAPES[name]
        x, mask, lengths = batch(shape)
        fns = candidates(shape)
        with torch.no_grad():
            reference = fns["packed_per_layer"](x, mask, lengths)
            diffs = {k: float((f(x, mask, lengths) - reference)[~mask].abs().max()) for k, f in fns.items()}
        times = {k: [] for k in fns}
        for k, f in fns.items():  # warm-up
            train_step_ms(f, x, mask, lengths)
        for _ in range(args.repeats):
            for k, f in fns.items():
                times[k].append(train_step_ms(f, x, mask, lengths))
        base = statistics.median(times["packed_per_layer"])
        print(f"\n{name}: L<={shape[0]} (min {shape[1]}), B={shape[2]}, d_in={shape[3]}, {shape[5]} x {shape[4]}"
              f"{' bidirectional' if shape[6] else ''}")
        print(f"  {'candidate':26s} {'CPU ms':>9s} {'vs packed':>10s} {'max |diff|':>11s}")
        for k in fns:
            ms = statistics.median(times[k])
            print(f"  {k:26s} {ms:9.1f} {base / ms:9.2f}x {diffs[k]:11.2e}{'' if diffs[k] < 1e-5 else '  (not exact)'}")
            results.append({"shape": name, "candidate": k, "median_ms": ms, "speedup_vs_packed": base / ms,
                            "max_abs_diff": diffs[k], "exact": diffs[k] < 1e-5})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
