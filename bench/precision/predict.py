"""predict.py's throughput in fp32, int8 and bf16 on one trained run, in one process with paired
interleaved rounds (bench/harness.py): the same inputs through ``load_predictor(run, precision=...)``,
the same code path as ``python predict.py run=<run> precision=<p>``.

    python -m bench.precision.predict --run <run dir | model.pt> --input <one input per line> \
        [--limit 400] [--threads 2] [--repeats 5] [--option mode=score] [--product-share]

Prints words/s of input per precision and the speed-up over fp32, headed by the CPU model and
``get_cpu_capability()``; docs/speed/low_precision.md#low-precision-int8-and-bf16 records its output. With
``--product-share``, one more call per precision under torch.profiler gives the share of its time spent in
the linear products (``PRODUCT_OPS``) and, for fp32, the most any low precision could gain by making
the products free, ``1 / (1 - share)``: what is left is work every precision shares (attention, search,
Python between ops). int8's per-row passes run through ctypes, which the profiler does not see: outside its share.
"""
import argparse
import time
from pathlib import Path

import torch

from sru.ops.precision import Precision

from bench.harness import interleaved, machine_info, make_timer, markdown_table, paired_ratio, summarize

# the ops that run a linear product in fp32 (MKL, oneDNN), int8 (oneDNN's qlinear, torch's dynamic linear) and bf16
PRODUCT_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "mkldnn::_linear_pointwise", "onednn::qlinear_pointwise",
               "quantized::linear_dynamic")

BASELINE = Precision.FP32.value  # the row the others are compared with


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--limit", type=int, default=400, help="first N input lines")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--precisions", default="fp32,int8,bf16")
    parser.add_argument("--option", action="append", default=[], help="task option key=value (e.g. mode=score)")
    parser.add_argument("--product-share", action="store_true",
                        help="profile one more call per precision: the share of time in linear products")
    args = parser.parse_args(argv)
    from tasks.engine.inference.predict_cmd import load_predictor

    options = dict(o.split("=", 1) for o in args.option)
    lines = [x for x in Path(args.input).read_text(encoding="utf-8").splitlines() if x.strip()][:args.limit]
    words = sum(len(x.split()) for x in lines)
    predictors = {p: load_predictor(args.run, precision=p, **options) for p in args.precisions.split(",")}
    torch.set_num_threads(args.threads)  # after loading: the run's own settings are applied there
    outputs = {p: pred.predict(lines) for p, pred in predictors.items()}  # warm-up, and kept to compare
    samples = interleaved({p: (lambda pred=pred: pred.predict(lines)) for p, pred in predictors.items()},
                          make_timer("cpu"), args.repeats)
    stats = {p: summarize(s) for p, s in samples.items()}
    info = machine_info(capability=torch.backends.cpu.get_cpu_capability())
    print(f"{info['cpu_model']}, get_cpu_capability()={info['capability']}, {args.threads} threads, torch "
          f"{info['torch']}; {len(lines)} inputs, {words} words; `{info['command']}`\n")
    same = {p: sum(a == b for a, b in zip(out, outputs[BASELINE])) for p, out in outputs.items()} \
        if BASELINE in outputs else {}
    rows = [[p, f"{words / (s['median_ms'] / 1e3):.0f}",
             f"{paired_ratio(stats[BASELINE], s):.2f}×" if BASELINE in stats else "–",
             f"{same.get(p, 0)}/{len(lines)}"] for p, s in stats.items()]
    print(markdown_table(["precision", "input words/s", "speed-up vs fp32 (paired)", "outputs equal to fp32"],
                         rows, "lrrr"))
    if args.product_share:
        print()
        print(product_shares(predictors, lines))


def product_shares(predictors, lines) -> str:
    """A table: per precision, the profiled call's seconds, the seconds its linear products ran and their share
    (self time of ``PRODUCT_OPS``; the profiler's own overhead lands outside them, so the share is a floor)."""
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for precision, predictor in predictors.items():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            predictor.predict(lines)
            seconds = time.perf_counter() - start
        products = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in PRODUCT_OPS) / 1e6
        share = products / seconds
        bound = f"{1 / (1 - share):.2f}×" if precision == BASELINE else "–"
        rows.append([precision, f"{seconds:.3f}", f"{products:.3f}", f"{100 * share:.1f} %", bound])
    return markdown_table(["precision", "profiled call s", "in linear products s", "share",
                           "speed-up if products were free"], rows, "lrrrr")


if __name__ == "__main__":
    main()
