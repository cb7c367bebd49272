"""The SRU layer (L=64 B=32 d=512, 2 layers) on CPU through each GEMM route, in one process with
paired interleaved rounds (bench/harness.py): fp32 with gemm=mkl / onednn / auto, int8
(``sru.quantize_dynamic``; its automatic engine and each engine forced) and bf16 (``sru.to_precision``), inference and a B=1 decode step; the training step
with gemm=mkl / onednn; the GEMM bound through both libraries; and nn.LSTM beside (issues 54, 55).
``--decode-only 1,2,4,8``: only decode steps at those batch sizes, fp32 against int8 (where int8 starts to pay).

    python -m bench.precision.layer --threads 2 --repeats 15
"""
import argparse
import copy
import os
from typing import Dict

import torch
from torch import nn

import sru
from sru.ops.backends import cpu_int8
from bench.harness import (calls_per_sample, interleaved, machine_info, make_timer, markdown_table,
                           paired_ratio, summarize)


def candidates(L: int, B: int, d: int, layers: int) -> Dict[str, callable]:
    torch.manual_seed(0)
    base = sru.SRU(d, d, num_layers=layers).eval()
    models = {lib: copy.deepcopy(base) for lib in ("mkl", "onednn", "auto")}
    for lib, m in models.items():
        m.gemm = lib
    int8 = sru.quantize_dynamic(base)
    lstm = nn.LSTM(d, d, num_layers=layers).eval()
    x, x1 = torch.randn(L, B, d), torch.randn(1, 1, d)
    w = torch.randn(d, 3 * d)
    packed = torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), L * B)
    train = {lib: copy.deepcopy(base).train() for lib in ("mkl", "onednn")}
    for lib, m in train.items():
        m.gemm = lib
    xg = torch.randn(L, B, d)

    def infer(m, inp):
        def run():
            with torch.no_grad():
                m(inp)
        return run

    bf16_model = sru.to_precision(base, "bf16")  # as predict.py / evaluate.py precision=bf16

    def step(m):
        def run():
            m.zero_grad(set_to_none=True)
            m(xg)[0].sum().backward()
        return run

    def int8_on(engine, inp):  # the int8 model with its weights packed by one engine (SRU_INT8_ENGINE)
        def run():
            os.environ[cpu_int8.INT8_ENGINE_VAR] = engine
            try:
                infer(int8, inp)()
            finally:
                del os.environ[cpu_int8.INT8_ENGINE_VAR]
        return run

    engines = [e for e in cpu_int8.usable_engines() if e != "x86"]  # x86 is fbgemm or oneDNN, chosen by torch
    rows = torch.randn(L * B, d)
    inference = {f"fp32 {k}": infer(m, x) for k, m in models.items()}
    inference.update({"int8": infer(int8, x), **{f"int8 {e}": int8_on(e, x) for e in engines},
                      "bf16": infer(bf16_model, x), "nn.LSTM": infer(lstm, x),
                      "GEMM bound mkl": lambda: [rows.mm(w) for _ in range(layers)],
                      "GEMM bound onednn": lambda: [torch.ops.mkldnn._linear_pointwise(rows, packed, None, "none", [], "")
                                                    for _ in range(layers)]})
    decode = {"decode fp32": infer(base, x1), "decode int8": infer(int8, x1),
              **{f"decode int8 {e}": int8_on(e, x1) for e in engines}, "decode bf16": infer(bf16_model, x1)}
    training = {f"train fp32 {k}": step(m) for k, m in train.items()}
    lstm_t = nn.LSTM(d, d, num_layers=layers)
    training["train nn.LSTM"] = step(lstm_t)
    return {**inference, **decode, **training}


def decode_candidates(batches, d: int, layers: int) -> Dict[str, callable]:
    """One decode step (L = 1) per batch size, fp32 and int8."""
    torch.manual_seed(0)
    base = sru.SRU(d, d, num_layers=layers).eval()
    int8 = sru.quantize_dynamic(base)
    out = {}
    for b in batches:
        x = torch.randn(1, b, d)
        for name, m in (("fp32", base), ("int8", int8)):
            def run(m=m, x=x):
                with torch.no_grad():
                    m(x)
            out[f"decode B={b} {name}"] = run
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--decode-only", help="comma-separated batch sizes: only decode steps, fp32 vs int8")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    timer = make_timer("cpu")
    if args.decode_only:
        return decode_only([int(b) for b in args.decode_only.split(",")], args, timer)
    fns = candidates(args.length, args.batch, args.width, 2)
    numbers = {k: calls_per_sample(f, timer, min_ms=30, warmup=3) for k, f in fns.items()}
    samples = {k: summarize(v) for k, v in interleaved(fns, timer, args.repeats, numbers).items()}
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, {args.threads} threads, torch "
          f"{info['torch']}, L={args.length} B={args.batch} d={args.width} x 2 layers; `{info['command']}`\n")
    refs = {"decode": "decode fp32", "train": "train fp32 mkl"}
    body = []
    for k, s in samples.items():
        ref = refs.get(k.split()[0], "fp32 mkl")
        body.append([k, f"{s['median_ms']:.3f}", f"{paired_ratio(samples[ref], s):.2f}× vs {ref}"])
    print(markdown_table(["candidate", "median ms", "speed-up (paired)"], body, "lrr"))
    bound = min(samples["GEMM bound mkl"]["median_ms"], samples["GEMM bound onednn"]["median_ms"])
    print(f"\nSRU inference (auto) / faster GEMM bound: {samples['fp32 auto']['median_ms'] / bound:.2f}×; "
          f"nn.LSTM / SRU training: {paired_ratio(samples['train nn.LSTM'], samples['train fp32 mkl']):.2f}×")
    print("gemm choices:", [(r["kind"], r["rows_up_to"], r["d_in"], r["d_out"], r["choice"])
                            for r in sru.ops.cpu_gemm_report()])


def decode_only(batches, args, timer) -> None:
    fns = decode_candidates(batches, args.width, 2)
    numbers = {k: calls_per_sample(f, timer, min_ms=30, warmup=3) for k, f in fns.items()}
    samples = {k: summarize(v) for k, v in interleaved(fns, timer, args.repeats, numbers).items()}
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, {args.threads} threads, torch "
          f"{info['torch']}, decode steps d={args.width} x 2 layers; `{info['command']}`\n")
    body = [[f"B = {b}", f"{samples[f'decode B={b} fp32']['median_ms'] * 1e3:.0f}",
             f"{samples[f'decode B={b} int8']['median_ms'] * 1e3:.0f}",
             f"{paired_ratio(samples[f'decode B={b} fp32'], samples[f'decode B={b} int8']):.2f}×"] for b in batches]
    print(markdown_table(["decode step", "fp32 µs", "int8 µs", "int8 speed-up (paired)"], body, "lrrr"))


if __name__ == "__main__":
    main()
