"""ONNX Runtime vs PyTorch CPU inference latency of an exported SRU stack.

(``python -m bench.onnx_speed``)

Needs the export extra (``pip install -e ".[export]"``). Exports with ``torch.onnx.export``
(sru/ops/export.py: the recurrence as an ONNX Scan) and times two inference workloads:

- ``step B=1``: one decoding step (L = 1, B = 1) with the state carried in and out;
- ``seq L=64 B=32``: a (64, 32) batch through the same stack, bidirectional (dynamic shapes).

PyTorch runs eagerly under ``torch.inference_mode`` (its own fused CPU kernels, the path a
deployment without ONNX would use); ONNX Runtime runs the exported graph with the CPU provider
and the same number of intra-op threads. Each sample is the mean of enough calls to last
``--min-ms`` (calibrated once, after a warm-up); the two runtimes alternate within each repeat,
and the ratio reported is the
median of the per-repeat ratios. The script also prints the largest output difference.
"""
import statistics
from pathlib import Path

import torch

import sru
from bench.harness import bench_parser, calls_per_sample, interleaved, make_timer, markdown_table, paired_ratio
from tasks.engine.run.devices import cpu_model


def parse_args(argv=None):
    parser = bench_parser(__doc__, threads=2, repeats=15, size=512, layers=2, min_ms=50.0)
    parser.add_argument("--out", default="outputs/bench_onnx")
    return parser.parse_args(argv)


class _Stack(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, c0):
        return self.rnn(x, c0)


def workload(name, rnn, x, c0, path: Path, dynamic: dict, args, ort):
    model = _Stack(rnn).eval()
    torch.onnx.export(model, (x, c0), str(path), dynamo=True, input_names=["x", "c0"],
                      output_names=["h", "c"], dynamic_shapes=dynamic)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    # No spin-waiting after a run: ORT's idle threads would otherwise keep both cores busy
    # while PyTorch's turn is timed, slowing PyTorch's B=1 step by orders of magnitude.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {"x": x.numpy(), "c0": c0.numpy()}
    with torch.inference_mode():
        want = model(x, c0)
    got = session.run(None, feed)
    diff = max(float((torch.from_numpy(g) - w).abs().max()) for g, w in zip(got, want))

    def run_torch():
        with torch.inference_mode():
            model(x, c0)

    def run_ort():
        session.run(None, feed)

    fns, timer = {"pytorch": run_torch, "onnxruntime": run_ort}, make_timer("cpu")
    numbers = {label: calls_per_sample(fn, timer, args.min_ms, warmup=3) for label, fn in fns.items()}
    samples = interleaved(fns, timer, args.repeats, numbers)
    return [name, f"{1e3 * statistics.median(samples['pytorch']):.3f}",
            f"{1e3 * statistics.median(samples['onnxruntime']):.3f}",
            f"{paired_ratio(samples['onnxruntime'], samples['pytorch']):.2f}x", f"{diff:.1e}"]


def main(argv=None):
    import onnxruntime as ort

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    d, layers = args.size, args.layers
    rows = []
    step_rnn = sru.SRU(d, d, num_layers=layers).eval()
    rows.append(workload("step B=1 (L=1, unidirectional, state carried)", step_rnn,
                         torch.randn(1, 1, d), torch.randn(layers, 1, d), out / "step.onnx",
                         {"x": {1: torch.export.Dim("batch")}, "c0": {1: torch.export.Dim("batch")}},
                         args, ort))
    seq_rnn = sru.SRU(d, d // 2, num_layers=layers, bidirectional=True).eval()
    length, batch = torch.export.Dim("length"), torch.export.Dim("batch")
    rows.append(workload("seq L=64 B=32 (bidirectional)", seq_rnn, torch.randn(64, 32, d),
                         torch.zeros(layers, 32, d), out / "seq.onnx",
                         {"x": {0: length, 1: batch}, "c0": {1: batch}}, args, ort))
    print(f"# ONNX Runtime {ort.__version__} vs PyTorch {torch.__version__} inference, CPU "
          f"{args.threads} threads, {cpu_model()}")
    print(f"SRU d={d}, {layers} layers; median of {args.repeats} repeats\n")
    print(markdown_table(["workload", "PyTorch ms", "ONNX Runtime ms", "ORT / PyTorch time", "max abs diff"],
                         rows, align="lrrrr"))


if __name__ == "__main__":
    main()
