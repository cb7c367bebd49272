"""One prepared SRU++ check for a GPU machine (about a minute on one GPU).

    PYTHONPATH=. python scripts/check_gpu_srupp.py [--device cuda] [--out outputs/check_gpu_srupp]
    PYTHONPATH=. python scripts/check_gpu_srupp.py --device cpu --speed-shape 16,2,32,8,2   # CPU smoke test

1. every official-made case (tests/fixtures/srupp/*.pt, float64) in float32 on the device
   (CUDA: the Triton recurrence + scaled_dot_product_attention): outputs and every gradient
   against the float64 values, relative to the largest magnitude, tolerance 1e-4;
2. bf16 autocast: finite outputs and gradients, outputs within 0.05 of float32;
3. torch.compile(fullgraph=True): forward and backward equal to eager (1e-4);
4. step decoding equal to the full causal forward (1e-4);
5. speed: a training step (forward + backward) and inference of SRU++ vs an equal-width
   nn.TransformerEncoder (scripts/bench_srupp.py's models) at L=512, B=16, d=1024, proj=256,
   4 layers (CUDA events, median of 20).

Writes summary.json into --out; exit status 1 if a correctness check fails.
"""
import argparse
import glob
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch
from torch import nn

from sru import SRUpp

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "srupp"


def rel_err(got, want) -> float:
    return float((got.double().cpu() - want.double().cpu()).abs().max() / want.abs().max().clamp_min(1e-12))


def official_case(path, device):
    case = torch.load(path, weights_only=True)
    kwargs = dict(case["kwargs"])
    model = SRUpp(kwargs.pop("input_size"), **kwargs).double().eval()
    model.load_state_dict(case["state_dict"])
    model = model.float().to(device)
    move = lambda t: (t.float() if t.is_floating_point() else t).to(device)  # noqa: E731
    inputs = {k: ([move(m).requires_grad_() for m in v] if isinstance(v, list) else
                  (move(v).requires_grad_() if v.is_floating_point() else move(v)))
              for k, v in case["inputs"].items()}
    inputs["attn_mask"] = inputs["attn_mask"].detach() if "attn_mask" in inputs else None
    h, c, _ = model(**inputs)
    w = case["loss_weights"]
    ((h * move(w["h"])).sum() + (c * move(w["c"])).sum()).backward()
    grads = {"input": inputs["input"].grad, **{f"param.{n}": p.grad for n, p in model.named_parameters()}}
    if "c0" in inputs:
        grads["c0"] = inputs["c0"].grad
    for i, m in enumerate(inputs.get("memory", [])):
        grads[f"memory.{i}"] = m.grad
    errors = {"h": rel_err(h, case["outputs"]["h"]), "c": rel_err(c, case["outputs"]["c"])}
    errors.update({k: rel_err(grads[k], v) for k, v in case["grads"].items()})
    return max(errors.values()), max(errors, key=errors.get)


def causal(length, device):
    return torch.full((length, length), float("-inf"), device=device).triu(1)


def small_model(device):
    torch.manual_seed(0)
    model = SRUpp(32, 32, 16, num_layers=3, num_heads=2, layer_norm=True).to(device)
    for cell in model.rnn_lst:
        cell.transform_module.alpha.data.fill_(0.5)
    return model


def check_autocast(device):
    model, x = small_model(device), torch.randn(20, 4, 32, device=device)
    want, _, _ = model(x, attn_mask=causal(20, device))
    with torch.autocast(device, dtype=torch.bfloat16):
        h, c, _ = model(x, attn_mask=causal(20, device))
    h.float().square().sum().backward()
    finite = all(torch.isfinite(p.grad).all() for p in model.parameters())
    return float((h.float() - want).abs().max()), bool(finite and torch.isfinite(h).all())


def check_compile(device):
    model, x = small_model(device), torch.randn(20, 4, 32, device=device)

    def run(fn):
        model.zero_grad()
        h, c, _ = fn(x, attn_mask=causal(20, device))
        (h.square().sum() + c.sum()).backward()
        return [h, c] + [p.grad.clone() for p in model.parameters()]
    eager = run(model)
    compiled = run(torch.compile(model, fullgraph=True))
    return max(rel_err(g, w) for g, w in zip(compiled, eager))


def check_decode(device):
    model, x = small_model(device).eval(), torch.randn(12, 3, 32, device=device)
    with torch.no_grad():
        want, _, _ = model(x, attn_mask=causal(12, device))
    cache, steps = None, []
    for t in range(12):
        h, cache = model.decode(x[t], cache)
        steps.append(h)
    return rel_err(torch.stack(steps), want)


def speed(device, L=512, B=16, d=1024, proj=256, layers=4):
    torch.manual_seed(0)
    models = {"srupp": SRUpp(d, d, proj, num_layers=layers).to(device),
              "transformer": nn.TransformerEncoder(
                  nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, norm_first=True),
                  layers, enable_nested_tensor=False).to(device)}
    x, mask = torch.randn(L, B, d, device=device, requires_grad=True), causal(L, device)
    calls = {"srupp": lambda: models["srupp"](x, attn_mask=mask)[0],
             "transformer": lambda: models["transformer"](x, mask=mask, is_causal=True)}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = {}
    for name, fn in calls.items():
        for mode in ("train_step", "forward"):
            def step():
                if mode == "forward":
                    with torch.no_grad():
                        fn()
                else:
                    fn().square().mean().backward()
            for _ in range(3):
                step()
            samples = []
            for _ in range(20 if device == "cuda" else 3):
                sync()
                start = time.perf_counter()
                step()
                sync()
                samples.append((time.perf_counter() - start) * 1e3)
            out[f"{name}/{mode}_ms"] = statistics.median(samples)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", default="outputs/check_gpu_srupp")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--speed-shape", default="512,16,1024,256,4", help="L,B,d,proj,layers")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device visible; use --device cpu for the smoke test")
    summary = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
               "torch": torch.__version__, "checks": {}, "failed": []}

    def record(name, fn, ok):
        try:
            value = fn()
            summary["checks"][name] = value
            if not ok(value):
                summary["failed"].append(name)
        except Exception:  # noqa: BLE001 - one failing check must not hide the others
            summary["checks"][name] = traceback.format_exc(limit=3)
            summary["failed"].append(name)
        print(f"{name}: {summary['checks'][name]}", flush=True)

    for path in sorted(glob.glob(str(FIXTURES / "*.pt"))):
        record(f"official/{Path(path).stem}", lambda p=path: official_case(p, args.device),
               lambda v: v[0] < 1e-4)
    record("autocast_bf16", lambda: check_autocast(args.device), lambda v: v[1] and v[0] < 0.05)
    record("compile_fullgraph", lambda: check_compile(args.device), lambda v: v < 1e-4)
    record("decode", lambda: check_decode(args.device), lambda v: v < 1e-4)
    if not args.skip_speed:
        shape = [int(v) for v in args.speed_shape.split(",")]
        record("speed", lambda: speed(args.device, *shape), lambda v: True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print("FAILED: " + ", ".join(summary["failed"]) if summary["failed"] else "all checks passed")
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
