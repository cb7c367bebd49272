"""Inference speed of every deployment route of an SRU against eager PyTorch (docs/deploy.md).

    python -m bench.deploy.speed [--length 64] [--batch 32] [--size 512] [--layers 2]
                                 [--threads 2] [--repeats 10] [--out outputs/bench_deploy]

One process, ``--threads`` intra-op threads for torch and ONNX Runtime alike, SRU(size, size,
num_layers=layers) at (length, batch). Routes: eager (``torch.inference_mode``, the fused CPU
kernel), TorchScript (``torch.jit.script``: sru/scripting/cells.py's loop), ``torch.export``'s
module (the ``sru_cpp`` op), the AOTInductor package with the fused op (dynamic length and
batch), the AOTInductor package of the decomposed export (``SRU_EXPORT_FUSED=0``, a scan;
reported as failing where torch cannot compile it), and ONNX Runtime (the ONNX export's Scan).
Each round times every route once, in rotating order; the ratio is the median of the
per-round ratios to eager. Prints a Markdown table with the largest difference from eager.
"""
import argparse
import os
import statistics
from pathlib import Path

import torch

import sru
from bench.harness import calls_per_sample, interleaved, make_timer, markdown_table, paired_ratio
from sru.deploy import compile_package, dynamic_shapes, export, load_package
from tasks.engine.run.devices import cpu_model


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--min-ms", type=float, default=100.0)
    parser.add_argument("--out", default="outputs/bench_deploy")
    return parser.parse_args(argv)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {(lines[-1] if lines else '')[:160]}"


def decomposed_package(model, x, path: Path):
    """The AOTInductor package of the scan export, or the reason it does not compile."""
    saved = os.environ.get("SRU_EXPORT_FUSED")
    os.environ["SRU_EXPORT_FUSED"] = "0"
    try:
        return load_package(compile_package(model, x, path)), None
    except Exception as exc:  # torch's compile errors (docs/deploy.md names the torch issue)
        return None, _first_line(exc)
    finally:
        if saved is None:
            os.environ.pop("SRU_EXPORT_FUSED")
        else:
            os.environ["SRU_EXPORT_FUSED"] = saved


def onnx_session(model, x, path: Path, threads: int):
    import onnxruntime as ort

    torch.onnx.export(model, (x,), str(path), dynamo=True, input_names=["x"],
                      output_names=["h", "c"], dynamic_shapes=dynamic_shapes(x))
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # see onnx_speed.py
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda inp: [torch.from_numpy(a) for a in session.run(None, {"x": inp.numpy()})]


def routes(model, x, out: Path, threads: int):
    """{name: callable(x) -> (h, c)} and {name: why it is missing}."""
    found, missing = {"eager": model}, {}
    found["TorchScript"] = torch.jit.script(model)
    found["torch.export module"] = export(model, x).module()
    found["AOTInductor (fused op)"] = load_package(compile_package(model, x, out / "sru_fused.pt2"))
    runner, why = decomposed_package(model, x, out / "sru_scan.pt2")
    if runner is None:
        missing["AOTInductor (decomposed scan)"] = why
    else:
        found["AOTInductor (decomposed scan)"] = runner
    try:
        found["ONNX Runtime"] = onnx_session(model, x, out / "sru.onnx", threads)
    except ImportError as exc:
        missing["ONNX Runtime"] = f"onnxruntime not installed ({exc})"
    return found, missing


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = sru.SRU(args.size, args.size, num_layers=args.layers).eval()
    x = torch.randn(args.length, args.batch, args.size)
    found, missing = routes(model, x, out, args.threads)
    with torch.inference_mode():
        want = model(x)
    diffs = {}
    for name, fn in found.items():
        with torch.no_grad():
            got = fn(x)
        diffs[name] = max(float((g - w).abs().max()) for g, w in zip(got, want))

    def timed(fn):
        def run():
            with torch.no_grad():
                fn(x)
        return run

    fns, timer = {name: timed(fn) for name, fn in found.items()}, make_timer("cpu")
    numbers = {name: calls_per_sample(fn, timer, args.min_ms, warmup=3) for name, fn in fns.items()}
    samples = interleaved(fns, timer, args.repeats, numbers)
    rows = [[name, f"{1e3 * statistics.median(samples[name]):.2f}",
             f"{paired_ratio(samples[name], samples['eager']):.2f}x", f"{diffs[name]:.1e}"]
            for name in found]
    rows += [[name, "-", "-", f"not available: {why}"] for name, why in missing.items()]
    print(f"# Deployment routes vs eager, CPU {args.threads} threads, {cpu_model()} "
          f"({torch.backends.cpu.get_cpu_capability()}), torch {torch.__version__}")
    print(f"SRU({args.size}, {args.size}, num_layers={args.layers}), L={args.length}, "
          f"B={args.batch}; median of {args.repeats} interleaved rounds\n")
    print(markdown_table(["route", "ms / batch", "time / eager", "max abs diff vs eager"], rows,
                         align="lrrl"))


if __name__ == "__main__":
    main()
