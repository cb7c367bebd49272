"""Beam search's per-step work on the logits (sru/ops/cpu/decoding.py ``beam_rows``): log_softmax and the run maxima
over its output (the route before), the same statistics as torch ops, and the C row pass, on 4,000-word rows
(the vocabulary of the translation task's default run), by row count, in one process with paired interleaved rounds
(bench/harness.py). Each call starts from a fresh copy of the logits, as a decoding step does; the copy is
timed as ``copy only`` and is part of every other figure.

    python -m bench.decoding.beam_rows --threads 1 --repeats 9
"""
import torch

from bench.harness import (bench_parser, calls_per_sample, interleaved, machine_info, make_timer, markdown_table,
                           paired_ratio, summarize)
from sru.ops.backends import cpu_decoding

VOCAB, RUN, BANNED = 4000, 32, (0, 2)
ROWS = [60, 200, 600, 1080]


def log_softmax_route(logits):
    lp = torch.log_softmax(logits, -1)
    lp[:, list(BANNED)] = float("-inf")
    return lp.view(lp.size(0), -1, RUN).amax(-1)


def main(argv=None):
    args = bench_parser(__doc__, threads=1, repeats=9).parse_args(argv)
    torch.set_num_threads(args.threads)
    if cpu_decoding.library() is None:
        raise SystemExit("beam_rows.cpp did not build: nothing to compare (see the warning above)")
    timer, g = make_timer("cpu" if args.threads == 1 else "wall"), torch.Generator().manual_seed(0)
    body = []
    for rows in ROWS:
        source, work = torch.randn(rows, VOCAB, generator=g) * 3, torch.empty(rows, VOCAB)
        fns = {"copy only": lambda: work.copy_(source),
               "log_softmax + run maxima": lambda: log_softmax_route(work.copy_(source)),
               "torch ops": lambda: cpu_decoding.torch_rows(work.copy_(source), BANNED, RUN),
               "C pass": lambda: cpu_decoding.beam_rows(work.copy_(source), BANNED, RUN)}
        with torch.no_grad():
            numbers = {k: calls_per_sample(f, timer, min_ms=20, warmup=3) for k, f in fns.items()}
            stats = {k: summarize(v) for k, v in interleaved(fns, timer, args.repeats, numbers).items()}
        body.append([rows, *(f"{stats[k]['median_ms']:.3f}" for k in fns),
                     f"{paired_ratio(stats['log_softmax + run maxima'], stats['C pass']):.2f}×"])
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, {args.threads} threads, torch "
          f"{info['torch']}; ms per step (median), rows x {VOCAB} words; `{info['command']}`\n")
    print(markdown_table(["rows", "copy only", "log_softmax + run maxima", "torch ops", "C pass",
                          "C pass faster (paired)"], body, "rrrrrr"))


if __name__ == "__main__":
    main()
