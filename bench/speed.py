"""Layer speed benchmark: SRU (every backend) vs nn.LSTM, kernel-3 conv1d and the GEMM bound.

Times inference (forward under no_grad) and a training step (forward + backward into the
parameters and the input) for each candidate of ``bench.registry``. Candidates are
interleaved round-robin inside one process (the order rotates every repeat) so that noise
from other processes hits all of them alike; within a round all candidates' inference runs,
then all their training steps, so an inference sample follows another inference sample, not
the same candidate's training step (whose buffers would still fill the caches; on 2 CPU
threads that made the small shape's inference ratio ~5% worse, docs/design_notes.md#how-the-benchmarks-measure). After a
warm-up each measurement is the mean of enough calls to last ``--min-ms``; we report medians
and inter-quartile ranges, the ratio to the GEMM bound and the speedup over the LSTM (each the
median over rounds of the per-round ratio, so load that drifts during the run cancels). Writes
``bench.json``, ``bench.md`` and ``speed.png`` into ``--out``. ``--decode`` times one step at a
time instead (L = 1, state carried; ``bench.decode``) and writes ``decode.json`` and ``decode.md``.
"""
import argparse
import json
import traceback
from pathlib import Path
from typing import Dict, List, Optional

import torch

from sru.ops.precision import AUTOCAST_NAMES
from bench import decode, registry
from bench.harness import calls_per_sample, interleaved_phases, machine_info, make_timer, paired_ratio, summarize
from bench.speed_report import judged_targets, plot, profile_train_step, speed_table

MODES = ("forward", "train_step")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads on CPU")
    parser.add_argument("--repeats", type=int, default=20, help="timed rounds over all candidates")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per candidate and mode")
    parser.add_argument("--min-ms", type=float, default=5.0,
                        help="each measurement averages enough calls to last this long")
    parser.add_argument("--shapes", default="all", choices=["paper", "judged", "all", "grid", "tiny"],
                        help="grid: the 8 CPU shapes (bidirectional and layer norm among them)")
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
    bad = [d for d in args.dtypes if d not in AUTOCAST_NAMES]
    if bad:
        parser.error(f"--dtypes: expected a comma list of fp32,bf16, received {bad}")
    return args


def time_shape(candidates: Dict[str, registry.Candidate], args, timer) -> Dict[str, Dict]:
    """Warm up and calibrate every (candidate, mode), then time them round-robin: each round all
    candidates' inference, then all their training steps."""
    phases = [{(name, mode): getattr(cand, mode) for name, cand in candidates.items()} for mode in MODES]
    numbers = {key: calls_per_sample(fn, timer, args.min_ms, args.warmup)
               for fns in phases for key, fn in fns.items()}
    samples = interleaved_phases(phases, timer, args.repeats, numbers)
    return {name: {mode: dict(summarize(samples[name, mode]), calls_per_sample=numbers[name, mode])
                   for mode in MODES} for name in candidates}


def add_ratios(rows: List[Dict]) -> None:
    """Per shape/dtype: each candidate's time over the GEMM bound's and the LSTM's over its
    (paired per round, see ``bench.harness.paired_ratio``). The GEMM bound is the faster of MKL's
    (``gemm-bound``) and oneDNN's (``gemm-bound-onednn``) per mode, when both were timed."""
    ref = {(r["shape"]["label"], r["dtype"], r["candidate"]): r for r in rows if "error" not in r}
    for r in rows:
        if "error" in r:
            continue
        bounds = [b for b in (ref.get((r["shape"]["label"], r["dtype"], name))
                              for name in ("gemm-bound", "gemm-bound-onednn")) if b]
        lstm = ref.get((r["shape"]["label"], r["dtype"], "lstm"))
        for mode in MODES:
            gemm = min(bounds, key=lambda b: b[mode]["median_ms"]) if bounds else None
            r[mode]["vs_gemm"] = paired_ratio(r[mode], gemm[mode]) if gemm else None
            r[mode]["speedup_vs_lstm"] = paired_ratio(lstm[mode], r[mode]) if lstm else None


def shape_dict(shape: registry.Shape) -> Dict[str, object]:
    return {"length": shape.length, "batch": shape.batch, "width": shape.width,
            "layers": shape.layers, "bidirectional": shape.bidirectional, "layer_norm": shape.layer_norm,
            "label": shape.label}


def build_and_check(shape, dtype, args, backends, keep, rows) -> Dict[str, registry.Candidate]:
    """The shape's candidates that run; one that cannot is reported in ``rows``, not timed."""
    candidates = {}
    for name, build in registry.build_candidates(shape, args.device, dtype, backends).items():
        if keep is not None and name not in keep:
            continue
        print(f"[{dtype} {shape.label}] build + check {name}", flush=True)
        try:
            cand = build()
            cand.forward()
            cand.train_step()
            candidates[name] = cand
        except Exception:  # noqa: BLE001 – one broken backend must not hide the others
            rows.append({"shape": shape_dict(shape), "dtype": dtype, "candidate": name,
                         "error": traceback.format_exc()})
            print(f"  FAILED: {rows[-1]['error'].splitlines()[-1]}", flush=True)
    return candidates


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
    info = machine_info(args.device, repeats=args.repeats, warmup=args.warmup, min_ms=args.min_ms,
                        timer=args.timer)
    if args.device == "cuda":
        info["tf32"] = False  # set above: fp32 runs are true fp32 for every candidate
    if args.decode:
        return decode.decode_main(args, timer, out, info)

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
            candidates = build_and_check(shape, dtype, args, backends, keep, rows)
            print(f"[{dtype} {shape.label}] timing {list(candidates)} x {args.repeats} rounds", flush=True)
            for name, res in time_shape(candidates, args, timer).items():
                rows.append({"shape": shape_dict(shape), "dtype": dtype, "candidate": name, **res})
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

    table = speed_table(rows)
    (out / "bench.json").write_text(json.dumps({"machine": info, "results": rows}, indent=1))
    (out / "bench.md").write_text(
        f"Command: `{info['command']}`  \nMachine: {info.get('gpu', info['cpu_model'])}, "
        f"{info['logical_cpus']} logical CPUs, {info['threads']} threads, torch {info['torch']}, "
        f"{info['date']}  \nmedian of {args.repeats} interleaved rounds [inter-quartile range]; "
        f"ratios: median over rounds of the per-round ratio\n\n{table}\n\n{judged_targets(rows)}")
    plot(rows, out / "speed.png", info)
    print("\n" + table + f"\n\nwrote {out / 'bench.json'}, {out / 'bench.md'}, {out / 'speed.png'}")
    return rows


if __name__ == "__main__":
    main()
