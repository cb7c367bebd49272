"""The checks behind ``scripts/check_gpu.py``, one prepared check for a short time on a GPU machine
(about 5 minutes on one GPU).

1. prints the device, torch and triton versions;
2. runs the Triton recurrence against the float64 reference ON THE GPU across the options
   (fp32/bf16/fp16, uni/bi, k=3/4, mixed-length padding, dropout mask, tanh, no skip term,
   per-step weights, awkward sizes), forward and backward with random upstream gradients,
   using the test suite's harness (``sru.testing``) and also its own small cases compiled
   (``sru.testing.CASES``, float64 and float32); plus bitwise determinism, a side
   stream, torch.compile (inductor) through the custom op;
3. measures the recurrence kernels' achieved memory bandwidth (bytes moved / time) at
   B=128, d=1024, L=256 (uni and bi, fp32 and bf16);
4. runs ``python -m bench.speed --device cuda --out OUT/bench``.

Everything goes to ``--out``: correctness.json, bandwidth.json, summary.md, bench/ and the
console log of the benchmark. Exit status 1 if any correctness check fails. ``--dry-run-cpu``
runs the small cases and a tiny bandwidth shape on CPU in Triton's interpreter (numbers
meaningless) so the script itself can be tested without a GPU. It imports the installed
``sru`` package (``pip install -e .``; or run with ``PYTHONPATH=.`` from the checkout).
"""
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Tuple

import torch

from sru.ops.triton.roofline import gpu_key, predicted_us, step_bytes
from bench.harness import calls_per_sample, interleaved, machine_info, make_timer
from sru import testing
from sru.ops.triton.kernels import SKIP_X
from sru.ops.triton.padded import recurrence_backward, recurrence_forward
from sru.ops.triton import elementwise_recurrence_triton

# (name, make_inputs keywords, call options) at GPU scale; sru.testing.CASES (the test
# suite's cases, small) run as well. Tolerances: relative to the largest reference magnitude.
CASES = [
    ("uni_k3", dict(L=32, B=8, d=64), {}),
    ("bi_k3_c0", dict(L=32, B=8, d=64, bidirectional=True, c0=True), {}),
    ("uni_k4", dict(L=16, B=4, d=48, k=4, c0=True), {}),
    ("bi_k4_pad_dropout_tanh", dict(L=40, B=6, d=96, bidirectional=True, k=4, lengths="random",
                                    mask_c=True), dict(activation="tanh")),
    ("no_skip", dict(L=16, B=4, d=32), dict(has_skip_term=False)),
    ("per_step_weights_bi_pad", dict(L=24, B=5, d=40, bidirectional=True, per_step=True,
                                     lengths="random"), {}),
    ("scale_x_bi_pad", dict(L=20, B=7, d=33, bidirectional=True, lengths="random",
                            mask_c=True), dict(scale_x=1.7)),
    ("tiny_L1_B1_d1", dict(L=1, B=1, d=1, bidirectional=True), {}),
    ("awkward_L63_d500", dict(L=63, B=5, d=500, bidirectional=True, lengths="random"), {}),
    ("paper_l128_d512", dict(L=128, B=32, d=512, c0=True), {}),
]
DEVICE = "cuda"
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 5e-3}


def make_inputs(dtype=torch.float32, **sizes):
    """The test suite's builder on DEVICE; parameters stay float32 (as under autocast)."""
    param_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    return testing.make_inputs(dtype=dtype, param_dtype=param_dtype, device=DEVICE, **sizes)


def check_case(name, sizes, options, dtype):
    """Triton (through sru.ops.elementwise_recurrence) vs the float64 reference, on DEVICE."""
    inputs = make_inputs(dtype=dtype, **sizes)
    errors = testing.compare_with_reference(testing.backend_fn("triton"), inputs, **options)
    worst = max(errors.values())
    return dict(case=name, dtype=str(dtype).replace("torch.", ""), ok=worst < TOLERANCE[dtype],
                worst_rel_err=worst, errors=errors)


def check_test_case(name, dtype):
    """One of the test suite's cases (sru.testing.CASES) at its own tolerance."""
    inputs, options = testing.case_inputs(name, dtype=dtype, device=DEVICE)
    errors = testing.compare_with_reference(testing.backend_fn("triton"), inputs, **options)
    worst = max(errors.values())
    return dict(case=f"tests:{name}", dtype=str(dtype).replace("torch.", ""),
                ok=worst < testing.TOLERANCE[dtype], worst_rel_err=worst, errors=errors)


def check_extras():
    """Determinism, a non-default stream, and torch.compile through the custom op."""
    results = []
    inputs = make_inputs(L=64, B=16, d=256, bidirectional=True, lengths="random")
    grad_h = torch.randn(64, 16, 512, device="cuda")
    grad_c = torch.randn(16, 512, device="cuda")
    first = testing.forward_backward(elementwise_recurrence_triton, inputs, grad_h, grad_c)
    second = testing.forward_backward(elementwise_recurrence_triton, inputs, grad_h, grad_c)
    results.append(dict(case="bitwise_deterministic",
                        ok=all(torch.equal(first[k], second[k]) for k in first)))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        on_side = testing.forward_backward(elementwise_recurrence_triton, inputs, grad_h, grad_c)
    torch.cuda.current_stream().wait_stream(stream)
    results.append(dict(case="side_stream", ok=all(torch.equal(first[k], on_side[k])
                                                   for k in first)))

    def layer(x_in, W, weight_c, bias):
        U = x_in @ W
        h, c = elementwise_recurrence_triton(U, x_in, weight_c, bias, None, 128)
        return torch.tanh(h).sum() + c.sum()

    x_in = torch.randn(32, 8, 128, device="cuda", requires_grad=True)
    W = (torch.randn(128, 384, device="cuda") / 12).requires_grad_()
    wc = torch.randn(256, device="cuda", requires_grad=True)
    b = torch.zeros(256, device="cuda", requires_grad=True)
    try:
        eager = torch.autograd.grad(layer(x_in, W, wc, b), [x_in, W, wc, b])
        compiled_fn = torch.compile(layer, fullgraph=True)
        compiled = torch.autograd.grad(compiled_fn(x_in, W, wc, b), [x_in, W, wc, b])
        worst = max(testing.rel_err(c, e) for c, e in zip(compiled, eager))
        results.append(dict(case="torch_compile_inductor", ok=worst < 1e-4, worst_rel_err=worst))
    except Exception:  # report, keep checking the rest
        results.append(dict(case="torch_compile_inductor", ok=False, error=traceback.format_exc()))
    return results


def cuda_time_ms(fn, repeats=20):
    """Median ms of single calls after a warm-up (CUDA events); in the CPU dry run one call, which
    only exercises the code path."""
    timer = make_timer(DEVICE)
    if DEVICE == "cpu":
        return 1e3 * timer(fn, 1)
    calls_per_sample(fn, timer, min_ms=0.0, warmup=3)
    return 1e3 * statistics.median(interleaved({"fn": fn}, timer, repeats)["fn"])


def bandwidth(L=256, B=128, d=1024):
    """Achieved DRAM bandwidth of the forward and the backward kernel (bytes they must move)."""
    rows = []
    for bidirectional in (False, True):
        for dtype in (torch.float32, torch.bfloat16):
            inputs = make_inputs(L=L, B=B, d=d, bidirectional=bidirectional, dtype=dtype, c0=True)
            args = {n: (t.detach() if torch.is_tensor(t) else t) for n, t in inputs.items()}
            dd = args["c0"].shape[1]
            es = args["U"].element_size()
            n_state = L * B * dd
            c0 = args["c0"]
            op_args = (args["U"], args["x"], args["weight_c"], args["bias"], c0, None, None, None,
                       1.0, d, SKIP_X, False)
            forward = lambda: recurrence_forward(*op_args, True)  # noqa: E731
            inference = lambda: recurrence_forward(*op_args, False)  # noqa: E731
            _, _, c_all = forward()
            grad_h = torch.randn(L, B, dd, device=DEVICE, dtype=dtype)
            grad_c = torch.randn(B, dd, device=DEVICE)
            backward = lambda: recurrence_backward(  # noqa: E731
                grad_h, grad_c, args["U"], args["x"], args["weight_c"], args["bias"], c0, None,
                None, None, c_all, 1.0, d, SKIP_X, False, False)
            # forward: read U (k=3) and x, write h and the fp32 c history
            fwd_bytes = n_state * (3 * es + es + es + 4)
            # backward: read grad_h, U, x, c history; write grad_U, grad_x
            bwd_bytes = n_state * (es + 3 * es + es + 4 + 3 * es + es)
            inf_bytes = fwd_bytes - n_state * 4  # inference writes no c history
            fwd_ms, bwd_ms = cuda_time_ms(forward), cuda_time_ms(backward)
            inf_ms = cuda_time_ms(inference)
            # Measured vs bandwidth-bound µs per step (sru/ops/triton/roofline.py; docs/gpu.md).
            gpu = gpu_key(torch.cuda.get_device_name() if DEVICE == "cuda" else "")
            per_step = step_bytes(B, d, bidirectional, es)
            rows.append(dict(L=L, B=B, d=d, bidirectional=bidirectional,
                             dtype=str(dtype).replace("torch.", ""),
                             inference_ms=inf_ms, inference_GBps=inf_bytes / inf_ms / 1e6,
                             forward_ms=fwd_ms, forward_GBps=fwd_bytes / fwd_ms / 1e6,
                             backward_ms=bwd_ms, backward_GBps=bwd_bytes / bwd_ms / 1e6,
                             predicted_for=gpu,
                             **{f"{kind}_us_per_step": ms * 1e3 / L for kind, ms in
                                (("inference", inf_ms), ("forward", fwd_ms), ("backward", bwd_ms))},
                             **{f"{kind}_predicted_us_per_step": predicted_us(n, gpu)
                                for kind, n in per_step.items()}))
            print(f"  bandwidth {rows[-1]}", flush=True)
    return rows


def block_sweep(L=256, B=128, d=1024):
    """Forward+backward time per BLOCK at the large shape, to tune launch_config."""
    inputs = make_inputs(L=L, B=B, d=d, bidirectional=True)
    grad_h = torch.randn(L, B, 2 * d, device=DEVICE)
    # padded.py and packed.py each hold launch_config: set both (the module objects, not the package's
    # names: ``sru.ops.triton.padded`` is the backend entry function of that name)
    launchers = [sys.modules["sru.ops.triton.padded"], sys.modules["sru.ops.triton.packed"]]
    default = launchers[0].launch_config
    rows = []
    try:
        for block in (32, 64, 128, 256):
            for module in launchers:
                module.launch_config = lambda n, b=block: (b, max(1, min(8, b // 32)), -(-n // b))
            def step():
                h, _ = elementwise_recurrence_triton(**inputs)
                torch.autograd.grad(h, [inputs["U"]], grad_h)
            rows.append(dict(block=block, fwd_bwd_ms=cuda_time_ms(step, repeats=10)))
            print(f"  block sweep {rows[-1]}", flush=True)
    finally:
        for module in launchers:
            module.launch_config = default
    return rows


def run_checks(out: Path, dry_run_cpu: bool = False) -> Tuple[Dict, List[Dict], List[Dict], List[Dict]]:
    """Correctness (every case, on DEVICE) then bandwidth and the BLOCK sweep; writes correctness.json
    and bandwidth.json into ``out``. Returns (machine info, correctness rows, bandwidth rows, sweep rows)."""
    global DEVICE
    if dry_run_cpu:
        DEVICE = "cpu"
    elif not torch.cuda.is_available():
        sys.exit("check_gpu.py needs a CUDA GPU (torch.cuda.is_available() is False)")

    import triton
    info = machine_info(DEVICE, triton=triton.__version__,
                        capability=torch.cuda.get_device_capability() if DEVICE == "cuda" else None)
    info["device"] = info.get("gpu", "cpu (interpreter)")
    print("device:", info, flush=True)

    started = time.time()
    results = []
    jobs = []  # (case, dtype, check) for every correctness check that runs here
    for name, sizes, options in CASES:
        if DEVICE == "cpu" and sizes["L"] * sizes["B"] * sizes["d"] > 4000:
            continue  # the interpreter is slow; the dry run only exercises this script
        dtypes = (torch.float32, torch.bfloat16, torch.float16) if DEVICE == "cuda" else (
            torch.float32,)
        jobs += [(name, dtype, lambda n=name, s=sizes, o=options, dt=dtype: check_case(n, s, o, dt))
                 for dtype in dtypes]
    # The test suite's own cases, compiled (CI only interprets them); one in the dry run.
    shared = list(testing.CASES) if DEVICE == "cuda" else ["padded-bi-k4-dropout-tanh"]
    jobs += [(f"tests:{name}", dtype, lambda n=name, dt=dtype: check_test_case(n, dt))
             for name in shared for dtype in (torch.float64, torch.float32)]
    for name, dtype, check in jobs:
        try:
            row = check()
        except Exception:
            row = dict(case=name, dtype=str(dtype), ok=False, error=traceback.format_exc())
        results.append(row)
        print(f"  {'ok  ' if row['ok'] else 'FAIL'} {name} {row['dtype']} "
              f"{row.get('worst_rel_err', row.get('error'))}", flush=True)
    for row in check_extras() if DEVICE == "cuda" else []:
        results.append(row)
        print(f"  {'ok  ' if row['ok'] else 'FAIL'} {row['case']}", flush=True)
    all_ok = all(r["ok"] for r in results)
    (out / "correctness.json").write_text(json.dumps(dict(info=info, results=results), indent=1))
    print(f"correctness: {'ALL OK' if all_ok else 'FAILURES'} ({time.time() - started:.0f}s)")

    rows = bandwidth() if DEVICE == "cuda" else bandwidth(L=3, B=2, d=8)
    sweep = block_sweep() if DEVICE == "cuda" else block_sweep(L=2, B=2, d=16)
    (out / "bandwidth.json").write_text(json.dumps(dict(info=info, rows=rows, block_sweep=sweep),
                                                   indent=1))
    return info, results, rows, sweep
