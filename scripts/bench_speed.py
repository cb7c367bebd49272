"""Layer speed benchmark: SRU (every backend) vs nn.LSTM, kernel-3 conv1d and the GEMM bound.

    python scripts/bench_speed.py [--device cpu|cuda] [--threads 2] [--repeats N]
                                  [--shapes paper|judged|all|tiny] [--dtypes fp32,bf16]
                                  [--out DIR] [--profile]
    python scripts/bench_speed.py --decode [--official DIR]   (one-step decoding latency)

Times inference (forward under no_grad) and a training step (forward + backward into the
parameters and the input) for each candidate of ``bench_registry.py``. Candidates are
interleaved round-robin inside one process (the order rotates every repeat) so that noise
from other processes hits all of them alike; within a round all candidates' inference runs,
then all their training steps, so an inference sample follows another inference sample, not
the same candidate's training step (whose buffers would still fill the caches; on 2 CPU
threads that made the small shape's inference ratio ~5% worse, docs/benchmarks.md). After a
warm-up each measurement is the mean of
enough calls to last ``--min-ms``; we report medians and inter-quartile ranges, the ratio to
the GEMM bound and the speedup over the LSTM (each the median over rounds of the per-round
ratio, so load that drifts during the run cancels). Writes ``bench.json``, ``bench.md`` and
``speed.png`` into ``--out``. ``--decode`` times one step at a time instead (L = 1, state
carried; ``bench_decode.py``) and writes ``decode.json`` and ``decode.md``.
"""
import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch

# Found beside this script (its folder is sys.path[0] when run as `python scripts/bench_speed.py`).
# The ``sru`` benchmarked is the one Python imports: the checkout's with `pip install -e .` or
# `PYTHONPATH=.`; the run prints its path.
import bench_decode
import bench_registry as registry

MODES = ("forward", "train_step")
PROFILED_STEPS = 3
GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}  # the unavoidable matmul work
GEMM_KERNEL_WORDS = ("gemm", "cutlass", "xmma")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads on CPU")
    parser.add_argument("--repeats", type=int, default=20, help="timed rounds over all candidates")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per candidate and mode")
    parser.add_argument("--min-ms", type=float, default=5.0,
                        help="each measurement averages enough calls to last this long")
    parser.add_argument("--shapes", default="all", choices=["paper", "judged", "all", "tiny"])
    parser.add_argument("--dtypes", default=None,
                        help="comma list of fp32,bf16 (bf16 = autocast); default fp32 on CPU, "
                             "fp32,bf16 on CUDA")
    parser.add_argument("--candidates", default=None,
                        help="comma list of candidate names to keep (default: all)")
    parser.add_argument("--profile", action="store_true",
                        help="also write torch.profiler tables of each SRU training step")
    parser.add_argument("--decode", action="store_true",
                        help="time one decoding step (L=1, state carried) instead of sequences")
    parser.add_argument("--official", default=None, metavar="DIR",
                        help="with --decode: also time the official sru package installed in DIR "
                             "(pip install --no-deps --target DIR sru==2.6.0)")
    parser.add_argument("--timer", default="wall", choices=["wall", "cpu"],
                        help="cpu: this thread's CPU time (needs --threads 1 on CPU): time spent "
                             "descheduled by other processes on a shared machine is not counted")
    parser.add_argument("--out", default="outputs/bench_speed")
    args = parser.parse_args(argv)
    if args.timer == "cpu" and (args.device != "cpu" or args.threads != 1):
        parser.error("--timer cpu: only with --device cpu --threads 1 (other threads' time is not seen)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch; use --device cpu")
    if args.repeats < 1 or args.threads < 1:
        parser.error(f"--repeats and --threads: expected >= 1, received {args.repeats}, {args.threads}")
    default_dtypes = "fp32,bf16" if args.device == "cuda" else "fp32"
    args.dtypes = (args.dtypes or default_dtypes).split(",")
    bad = [d for d in args.dtypes if d not in ("fp32", "bf16")]
    if bad:
        parser.error(f"--dtypes: expected a comma list of fp32,bf16, received {bad}")
    return args


# ---------------------------------------------------------------------------------------- timing

def make_timer(device: str, clock: str = "wall") -> Callable[[Callable[[], None], int], float]:
    """Return ``timer(fn, number) -> seconds per call``: CUDA events on GPU (the host only
    queues kernels), perf_counter on CPU (ops run synchronously), or with clock="cpu" the
    calling thread's CPU time (one thread does all the work with --threads 1)."""
    if device == "cuda":
        def timer(fn, number):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(number):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / number
    else:
        now = time.thread_time if clock == "cpu" else time.perf_counter

        def timer(fn, number):
            start = now()
            for _ in range(number):
                fn()
            return (now() - start) / number
    return timer


def summarize(samples_s: List[float]) -> Dict[str, object]:
    """Median and quartiles in ms; the samples stay in round order so ratios can be paired."""
    ms = [s * 1e3 for s in samples_s]
    if len(ms) >= 2:
        q25, _, q75 = statistics.quantiles(ms, n=4, method="inclusive")
    else:
        q25 = q75 = ms[0]
    return {"median_ms": statistics.median(ms), "q25_ms": q25, "q75_ms": q75,
            "samples_ms": [round(v, 4) for v in ms]}


def paired_ratio(mine: Dict, other: Dict) -> float:
    """Median over rounds of mine/other, each round's two samples taken moments apart: load
    that drifts during the run cancels out (a ratio of the two medians would not)."""
    return statistics.median(a / b for a, b in zip(mine["samples_ms"], other["samples_ms"]))


def time_shape(candidates: Dict[str, registry.Candidate], args, timer) -> Dict[str, Dict]:
    """Warm up and calibrate every (candidate, mode), then time them round-robin, mode by mode."""
    numbers = {}
    for name, cand in candidates.items():
        for mode in MODES:
            fn = getattr(cand, mode)
            for _ in range(args.warmup):
                fn()
            one_call = timer(fn, 1)
            numbers[name, mode] = max(1, math.ceil(args.min_ms / 1e3 / max(one_call, 1e-9)))
    samples = {key: [] for key in numbers}
    names = list(candidates)
    gc.collect()
    gc.disable()  # like timeit: a collection pause would land on whichever candidate runs then
    try:
        for rep in range(args.repeats):
            # Rotate the order each round so no candidate always runs right after the same one.
            shift = rep % len(names)
            for mode in MODES:
                for name in names[shift:] + names[:shift]:
                    fn = getattr(candidates[name], mode)
                    samples[name, mode].append(timer(fn, numbers[name, mode]))
    finally:
        gc.enable()
    return {name: {mode: dict(summarize(samples[name, mode]), calls_per_sample=numbers[name, mode])
                   for mode in MODES} for name in names}


def add_ratios(rows: List[Dict]) -> None:
    """Per shape/dtype: each candidate's time over the GEMM bound's and the LSTM's over its
    (paired per round, see ``paired_ratio``)."""
    ref = {(r["shape"]["label"], r["dtype"], r["candidate"]): r for r in rows if "error" not in r}
    for r in rows:
        if "error" in r:
            continue
        gemm = ref.get((r["shape"]["label"], r["dtype"], "gemm-bound"))
        lstm = ref.get((r["shape"]["label"], r["dtype"], "lstm"))
        for mode in MODES:
            r[mode]["vs_gemm"] = paired_ratio(r[mode], gemm[mode]) if gemm else None
            r[mode]["speedup_vs_lstm"] = paired_ratio(lstm[mode], r[mode]) if lstm else None


# ---------------------------------------------------------------------------------------- output

def machine_info(args) -> Dict[str, object]:
    cpu_model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu_model": cpu_model, "logical_cpus": os.cpu_count(),
            "threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "device": args.device,
            "command": " ".join([Path(sys.argv[0]).as_posix()] + sys.argv[1:]),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "repeats": args.repeats, "warmup": args.warmup, "min_ms": args.min_ms,
            "timer": args.timer}
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
        info["tf32"] = False  # set in main(): fp32 runs are true fp32 for every candidate
    return info


def fmt(value: Optional[float], spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown_table(rows: List[Dict]) -> str:
    lines = ["| shape | dtype | candidate | fwd ms [IQR] | fwd+bwd ms [IQR] | fwd / GEMM | "
             "fwd+bwd / GEMM | speedup vs LSTM (fwd / fwd+bwd) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        head = f"| {r['shape']['label']} | {r['dtype']} | {r['candidate']} "
        if "error" in r:
            lines.append(head + f"| error: {r['error'].splitlines()[-1][:80]} | | | | |")
            continue
        f, t = r["forward"], r["train_step"]
        lines.append(
            head + f"| {f['median_ms']:.3f} [{f['q25_ms']:.3f}–{f['q75_ms']:.3f}] "
            f"| {t['median_ms']:.3f} [{t['q25_ms']:.3f}–{t['q75_ms']:.3f}] "
            f"| {fmt(f['vs_gemm'], '.2f')}x | {fmt(t['vs_gemm'], '.2f')}x "
            f"| {fmt(f['speedup_vs_lstm'], '.2f')}x / {fmt(t['speedup_vs_lstm'], '.2f')}x |")
    return "\n".join(lines)


def judged_targets(rows: List[Dict]) -> str:
    """Markdown lines checking each SRU backend against the issue's judged-shape targets."""
    t = registry.JUDGED_TARGETS
    lines = []
    for r in rows:
        if (r["shape"]["label"] != registry.JUDGED_SHAPE.label or r["dtype"] != "fp32"
                or not r["candidate"].startswith("sru-") or "error" in r):
            continue
        train, fwd = r["train_step"], r["forward"]
        checks = [("fwd+bwd / GEMM", train["vs_gemm"], "<=", t["train_vs_gemm_max"]),
                  ("fwd / GEMM", fwd["vs_gemm"], "<=", t["forward_vs_gemm_max"]),
                  ("fwd+bwd speedup vs LSTM", train["speedup_vs_lstm"], ">=", t["train_speedup_vs_lstm_min"])]
        parts = []
        for what, value, op, bound in checks:
            if value is None:
                parts.append(f"{what} not measured")
                continue
            met = value <= bound if op == "<=" else value >= bound
            parts.append(f"{what} {value:.2f}x (target {op} {bound}x: {'met' if met else 'NOT met'})")
        lines.append(f"- {r['candidate']}: " + "; ".join(parts))
    if not lines:
        return ""
    return f"Judged shape ({registry.JUDGED_SHAPE.label}, fp32) targets:\n\n" + "\n".join(lines) + "\n"


def plot(rows: List[Dict], path: Path, info: Dict) -> None:
    """The paper's figure style: time per candidate, bars grouped by shape (log scale); top row
    the training step (fwd+bwd, the paper's figure), bottom row inference; one column per dtype."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    fig, axes = plt.subplots(2, len(dtypes), figsize=(6 * len(dtypes) + 1, 7.5), squeeze=False)
    machine = info.get("gpu") or f"{info['cpu_model']}, {info['threads']} threads"
    for col, dtype in enumerate(dtypes):
        ok = [r for r in rows if r["dtype"] == dtype and "error" not in r]
        shapes = list(dict.fromkeys(r["shape"]["label"] for r in ok))
        cands = list(dict.fromkeys(r["candidate"] for r in ok))
        width = 0.8 / max(len(cands), 1)
        panels = [("train_step", "forward + backward"), ("forward", "forward (no_grad)")]
        for row, (mode, what) in enumerate(panels):
            ax = axes[row][col]
            for i, cand in enumerate(cands):
                xs, ys, errs = [], [], [[], []]
                for j, label in enumerate(shapes):
                    for r in ok:
                        if r["candidate"] == cand and r["shape"]["label"] == label:
                            t = r[mode]
                            xs.append(j + (i - (len(cands) - 1) / 2) * width)
                            ys.append(t["median_ms"])
                            errs[0].append(t["median_ms"] - t["q25_ms"])
                            errs[1].append(t["q75_ms"] - t["median_ms"])
                ax.bar(xs, ys, width, yerr=errs, label=cand, capsize=2)
            ax.set_xticks(range(len(shapes)))
            ax.set_xticklabels(shapes, fontsize=8)
            ax.set_yscale("log")
            ax.set_ylabel(f"{what} (ms, median, IQR)", fontsize=9)
            ax.set_title(f"{what}, {dtype}, {machine}", fontsize=9)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def is_gemm(op_name: str) -> bool:
    # On GPU the time sits on the kernels (cuBLAS/CUTLASS names), not on the aten::mm calls.
    return op_name in GEMM_OPS or any(word in op_name.lower() for word in GEMM_KERNEL_WORDS)


def profile_train_step(cand: registry.Candidate, path: Path, device: str) -> str:
    """Where a training step's time goes, by operator (self time), for the ops engineer."""
    from torch.profiler import ProfilerActivity, profile

    on_gpu = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    cand.train_step()  # warm-up: lazy builds, allocator caches
    with profile(activities=activities) as prof:
        for _ in range(PROFILED_STEPS):
            cand.train_step()
        if on_gpu:
            torch.cuda.synchronize()
    averages = prof.key_averages()
    key = "self_device_time_total" if on_gpu else "self_cpu_time_total"
    total = sum(getattr(e, key) for e in averages) or 1
    gemm = sum(getattr(e, key) for e in averages if is_gemm(e.key))
    headline = (f"{'GPU' if on_gpu else 'CPU'} self time per training step: "
                f"{total / PROFILED_STEPS / 1e3:.3f} ms, of which GEMMs {100 * gemm / total:.1f}%, "
                f"everything else {100 * (total - gemm) / total:.1f}%\n")
    table = headline + averages.table(sort_by=key, row_limit=20)
    path.write_text(table)
    return table


# ------------------------------------------------------------------------------------------ main

def main(argv: Optional[List[str]] = None) -> List[Dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        # "fp32" means fp32 for every candidate: cuDNN convolutions would otherwise use TF32
        # while cuBLAS matmuls do not (PyTorch's defaults differ), skewing the comparison.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timer = make_timer(args.device, args.timer)
    info = machine_info(args)
    if args.decode:
        return bench_decode.decode_main(args, timer, summarize, paired_ratio, out, info)

    try:
        backends = registry.sru_backends(args.device)
    except ImportError as err:  # the layer package is missing or broken: still time the baselines
        print(f"warning: no SRU candidates, sru.ops failed to import: {err}", flush=True)
        backends = []
    info["sru_backends"] = backends
    keep = None if args.candidates is None else set(args.candidates.split(","))
    known = set(registry.build_candidates(registry.TINY_SHAPES[0], args.device, "fp32", backends))
    if keep is not None and not keep <= known:
        raise ValueError(f"--candidates: expected a comma list from {sorted(known)}, "
                         f"received unknown {sorted(keep - known)}")
    import sru
    print(f"{info['cpu_model']} | torch {info['torch']} | device {args.device} | "
          f"threads {info['threads']} | SRU backends {backends} | sru from {sru.__file__}", flush=True)

    rows = []
    for dtype in args.dtypes:
        for shape in registry.shapes_for(args.shapes, args.device):
            builders = registry.build_candidates(shape, args.device, dtype, backends)
            candidates = {}
            for name, build in builders.items():
                if keep is not None and name not in keep:
                    continue
                print(f"[{dtype} {shape.label}] build + check {name}", flush=True)
                try:
                    cand = build()
                    cand.forward()
                    cand.train_step()  # a candidate that cannot run is reported, not timed
                    candidates[name] = cand
                except Exception:  # noqa: BLE001 – one broken backend must not hide the others
                    rows.append({"shape": dataclass_dict(shape), "dtype": dtype, "candidate": name,
                                 "error": traceback.format_exc()})
                    print(f"  FAILED: {rows[-1]['error'].splitlines()[-1]}", flush=True)
            print(f"[{dtype} {shape.label}] timing {list(candidates)} x {args.repeats} rounds", flush=True)
            results = time_shape(candidates, args, timer)
            for name, res in results.items():
                rows.append({"shape": dataclass_dict(shape), "dtype": dtype, "candidate": name, **res})
            if args.profile:
                for name, cand in candidates.items():
                    if name.startswith("sru-"):
                        dims = f"{shape.length}x{shape.batch}x{shape.width}x{shape.layers}"
                        path = out / f"profile_{dtype}_{dims}_{name}.txt"
                        print(f"[{dtype} {shape.label}] profile {name} -> {path}\n"
                              + profile_train_step(cand, path, args.device), flush=True)
            del candidates
            if args.device == "cuda":
                torch.cuda.empty_cache()  # the next shape starts from the same empty pool
    add_ratios(rows)

    table = markdown_table(rows)
    (out / "bench.json").write_text(json.dumps({"machine": info, "results": rows}, indent=1))
    (out / "bench.md").write_text(
        f"Command: `{info['command']}`  \nMachine: {info.get('gpu', info['cpu_model'])}, "
        f"{info['logical_cpus']} logical CPUs, {info['threads']} threads, torch {info['torch']}, "
        f"{info['date']}  \nmedian of {args.repeats} interleaved rounds [inter-quartile range]; "
        f"ratios: median over rounds of the per-round ratio\n\n{table}\n\n{judged_targets(rows)}")
    plot(rows, out / "speed.png", info)
    print("\n" + table + f"\n\nwrote {out / 'bench.json'}, {out / 'bench.md'}, {out / 'speed.png'}")
    return rows


def dataclass_dict(shape: registry.Shape) -> Dict[str, object]:
    return {"length": shape.length, "batch": shape.batch, "width": shape.width,
            "layers": shape.layers, "label": shape.label}


if __name__ == "__main__":
    main()
