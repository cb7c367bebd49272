"""The SRU's CPU GEMMs through both libraries torch links: MKL (``torch.mm`` / ``addmm`` /
``F.linear`` in fp32) and oneDNN (``torch.ops.mkldnn._linear_pointwise``, plain and with the weight
prepacked by ``torch.ops.mkldnn._reorder_linear_weight``), in one process, paired interleaved
rounds (bench/harness.py), so the GEMM bound of the layer is reported through the faster library
(docs/speed/gemm.md). Also the low-precision routes: bf16 ``F.linear`` (oneDNN), the int8
dynamic-quantised linear (``torch.ops.quantized.linear_dynamic``, fbgemm/x86 and oneDNN engines, one
activation scale per call) and sru's own int8 product (``sru.ops.cpu.int8.per_token_product``: one scale
per row, its default engine, quantisation passes included).

    python -m bench.precision.gemm --threads 2 --repeats 15

Prints a Markdown table (GFLOP/s per route and the oneDNN/MKL ratio) headed by the CPU model and
``torch.backends.cpu.get_cpu_capability()``; docs/benchmarks.md records its output.
"""
import argparse
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from bench.harness import (calls_per_sample, interleaved, machine_info, make_timer, markdown_table,
                           paired_ratio, summarize)

# name: (rows, in, out, which product). "fwd": U = X W; "dx": dX = dU W^T; "dw": dW = X^T dU.
SHAPES = {
    "forward U=XW (2048x512 · 512x1536)": (2048, 512, 1536, "fwd"),
    "backward dX=dU·Wᵀ": (2048, 512, 1536, "dx"),
    "backward dW=Xᵀ·dU": (2048, 512, 1536, "dw"),
    "decode B=32 (32x512 · 512x1536)": (32, 512, 1536, "fwd"),
    "decode B=1 (1x512 · 512x1536)": (1, 512, 1536, "fwd"),
    "LM softmax (2048x256 · 256x10000)": (2048, 256, 10000, "fwd"),
}


def candidates(rows: int, d_in: int, d_out: int, kind: str, low_precision: bool
               ) -> Dict[str, Callable[[], object]]:
    """Every route computing the same product, as zero-argument calls."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, d_in, generator=g)
    weight = torch.randn(d_in, d_out, generator=g) / d_in ** 0.5  # the SRU's (in, out) layout
    dU = torch.randn(rows, d_out, generator=g)
    linear = torch.ops.mkldnn._linear_pointwise
    if kind == "fwd":
        w_t = weight.t().contiguous()  # (out, in): F.linear's and oneDNN's layout
        packed = torch.ops.mkldnn._reorder_linear_weight(w_t, rows)
        routes = {"mkl": lambda: x.mm(weight),
                  "mkl F.linear": lambda: F.linear(x, w_t),
                  "onednn": lambda: linear(x, w_t, None, "none", [], ""),
                  "onednn prepacked": lambda: linear(x, packed, None, "none", [], "")}
        if low_precision:
            xb, wb = x.bfloat16(), w_t.bfloat16()
            routes["bf16 F.linear"] = lambda: F.linear(xb, wb)
            qw = torch.quantize_per_channel(w_t, w_t.abs().amax(1) / 127, torch.zeros(d_out, dtype=torch.long),
                                            0, torch.qint8)
            packed_q = torch.ops.quantized.linear_prepack(qw, None)
            routes["int8 dynamic"] = lambda: torch.ops.quantized.linear_dynamic(x, packed_q, True)
            if "onednn" in torch.backends.quantized.supported_engines:  # its AMX kernels (sru's choice there)
                before, torch.backends.quantized.engine = torch.backends.quantized.engine, "onednn"
                packed_o = torch.ops.quantized.linear_prepack(qw, None)
                torch.backends.quantized.engine = before
                routes["int8 onednn"] = lambda: torch.ops.quantized.linear_dynamic(x, packed_o, False)
            from sru.ops.backends import cpu_int8 as int8
            from sru.quantize import quantize_weight
            q, scale = quantize_weight(w_t)

            def per_token():
                with torch.no_grad():
                    return int8.per_token_product(x, q, scale)
            routes["int8 sru per token"] = per_token
        return routes
    if kind == "dx":  # dU (rows, out) · W^T: the weight (in, out) is F.linear's (out, in) here
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, rows)
        return {"mkl": lambda: dU.mm(weight.t()),
                "onednn": lambda: linear(dU, weight, None, "none", [], ""),
                "onednn prepacked": lambda: linear(dU, packed, None, "none", [], "")}
    # dW = X^T dU: both operands are activations, nothing to prepack
    return {"mkl": lambda: x.t().mm(dU),
            "onednn": lambda: linear(x.t(), dU.t(), None, "none", [], "")}


def run(threads: int, repeats: int, low_precision: bool, only: Optional[List[str]] = None) -> List[Dict]:
    torch.set_num_threads(threads)
    timer = make_timer("cpu")
    rows_out = []
    for name, (rows, d_in, d_out, kind) in SHAPES.items():
        if only and not any(o in name for o in only):
            continue
        fns = candidates(rows, d_in, d_out, kind, low_precision)
        numbers = {k: calls_per_sample(f, timer, min_ms=20, warmup=3) for k, f in fns.items()}
        samples = {k: summarize(v) for k, v in interleaved(fns, timer, repeats, numbers).items()}
        flop = 2 * rows * d_in * d_out
        gflops = {k: flop / (s["median_ms"] * 1e-3) / 1e9 for k, s in samples.items()}
        best_onednn = min((k for k in samples if k.startswith("onednn")), key=lambda k: samples[k]["median_ms"])
        row = {"shape": name, "gflops": gflops,
               "onednn_over_mkl": paired_ratio(samples["mkl"], samples[best_onednn]), "best_onednn": best_onednn}
        for k in ("bf16 F.linear", "int8 dynamic", "int8 onednn", "int8 sru per token"):
            if k in samples:
                row[k + " over mkl"] = paired_ratio(samples["mkl"], samples[k])
        rows_out.append(row)
    return rows_out


def markdown(rows: List[Dict]) -> str:
    routes = sorted({k for r in rows for k in r["gflops"]}, key=lambda k: ["mkl", "mkl F.linear", "onednn",
                                                                          "onednn prepacked", "bf16 F.linear",
                                                                          "int8 dynamic", "int8 onednn",
                                                                          "int8 sru per token"].index(k))
    header = ["GEMM", *[f"{k} GFLOP/s" for k in routes], "oneDNN / MKL speed"]
    body = [[r["shape"], *[f"{r['gflops'][k]:.0f}" if k in r["gflops"] else "–" for k in routes],
             f"{r['onednn_over_mkl']:.2f}× ({r['best_onednn']})"] for r in rows]
    return markdown_table(header, body, "l" + "r" * (len(routes) + 1))


def main(argv=None) -> List[Dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--low-precision", action="store_true", help="add bf16 and int8 routes (forward shapes)")
    parser.add_argument("--only", nargs="*", help="substrings of the shape names to run")
    args = parser.parse_args(argv)
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    rows = run(args.threads, args.repeats, args.low_precision, args.only)
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, {args.threads} threads, "
          f"torch {info['torch']}; `{info['command']}`\n")
    print(markdown(rows))
    return rows


if __name__ == "__main__":
    main()
