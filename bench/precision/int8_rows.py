"""Where int8 pays: one int8 product (per-token activations, sru/ops/cpu/int8.py) against the float32
product with the same dequantised weight, by row count, for the products of the SRU layer and of
translation's decoder (d_model 256: attention 256 x 256, SRU 256 x 768, the 4,000-word output layer), in one
process with paired interleaved rounds (bench/harness.py). Sets ``INT8_MIN_WORK`` (docs/ops.md).

    python -m bench.precision.int8_rows --threads 2 --repeats 9
"""
import argparse

import torch
import torch.nn.functional as F

from bench.harness import calls_per_sample, interleaved, machine_info, make_timer, markdown_table, paired_ratio, summarize
from sru.ops.backends import cpu_int8 as int8
from sru.quantize import quantize_weight

PRODUCTS = [(256, 256), (256, 768), (256, 4000), (512, 1536)]  # (in, out)
ROWS = [1, 6, 16, 36, 96, 256, 600]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    int8.INT8_MIN_WORK = {0: 0}  # the int8 kernel at every size; the table says where it wins
    timer, g = make_timer("cpu"), torch.Generator().manual_seed(0)
    body = []
    for d_in, d_out in PRODUCTS:
        w = torch.randn(d_out, d_in, generator=g) / d_in ** 0.5
        q, scale = quantize_weight(w)  # as sru.quantize_dynamic does
        weight, bias = q.float() * scale[:, None], torch.randn(d_out, generator=g)
        ratios = []
        for rows in ROWS:
            x = torch.randn(rows, d_in, generator=g)
            fns = {"fp32": lambda: F.linear(x, weight, bias), "int8": lambda: int8.int8_linear(x, q, scale, bias)}
            with torch.no_grad():
                numbers = {k: calls_per_sample(f, timer, min_ms=5, warmup=3) for k, f in fns.items()}
                stats = {k: summarize(v) for k, v in interleaved(fns, timer, args.repeats, numbers).items()}
            ratios.append(f"{paired_ratio(stats['fp32'], stats['int8']):.2f}×")
        body.append([f"{d_in} × {d_out}", *ratios])
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, {args.threads} threads, torch "
          f"{info['torch']}; int8 speed-up over fp32 (paired), by rows; `{info['command']}`\n")
    print(markdown_table(["product (in × out)", *[f"{r} rows" for r in ROWS]], body, "l" + "r" * len(ROWS)))


if __name__ == "__main__":
    main()
