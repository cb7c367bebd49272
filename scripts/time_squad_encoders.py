"""Time the SQuAD reader's two encoders alone (forward + backward), SRU vs LSTM, at the reader's shapes.

    python scripts/time_squad_encoders.py --layers 6 --hidden 128 --threads 2

Paragraph encoder input = 2 x embedding dim + 5 token features (DrQA's concatenation), question encoder
input = embedding dim; both bidirectional with every layer's output concatenated, as in
tasks/squad/model.py, on random inputs of the generated data's typical lengths (paragraph 100 tokens,
question 20, batch 32). Prints wall and CPU seconds per training step of the two encoders.
"""
from __future__ import annotations

import argparse
import time

import torch

from tasks.common.encoders import build_encoder


def step_seconds(unit: str, layers: int, hidden: int, emb: int, batch: int, doc_len: int, q_len: int,
                 repeats: int) -> tuple:
    cfg = {"name": unit, "hidden_size": hidden, "num_layers": layers, "dropout": 0.2, "bidirectional": True}
    if unit == "sru":
        cfg["rnn_dropout"] = 0.2
    doc_rnn, q_rnn = build_encoder(cfg, 2 * emb + 5), build_encoder(cfg, emb)
    doc = torch.randn(doc_len, batch, 2 * emb + 5, requires_grad=True)
    q = torch.randn(q_len, batch, emb, requires_grad=True)
    mask_doc = torch.zeros(doc_len, batch, dtype=torch.bool)
    mask_doc[doc_len * 3 // 4:, ::2] = True  # half the paragraphs are a quarter shorter: padding is exercised
    mask_q = torch.zeros(q_len, batch, dtype=torch.bool)
    times = []
    for i in range(repeats + 1):  # the first step warms up (allocations) and is not counted
        t0, c0 = time.perf_counter(), time.process_time()
        outs = [torch.cat(doc_rnn(doc, mask_pad=mask_doc, return_all_layers=True)[0], -1),
                torch.cat(q_rnn(q, mask_pad=mask_q, return_all_layers=True)[0], -1)]
        sum(o.sum() for o in outs).backward()
        if i:
            times.append((time.perf_counter() - t0, time.process_time() - c0))
    return tuple(sum(t[k] for t in times) / len(times) for k in (0, 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--emb", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for unit in ("sru", "lstm"):
        wall, cpu = step_seconds(unit, args.layers, args.hidden, args.emb, args.batch, 100, 20, args.repeats)
        print(f"{unit}: {args.layers} layers x {args.hidden}, batch {args.batch}: encoders forward+backward "
              f"{wall:.3f} s wall, {cpu:.3f} s CPU per step (mean of {args.repeats})", flush=True)


if __name__ == "__main__":
    main()
