"""One prepared SRU++ check for a GPU machine (about a minute on one GPU; ``python -m bench.srupp_check``).

1. every official-made case (tests/fixtures/srupp/*.pt, float64) in float32 on the device
   (CUDA: the Triton recurrence + scaled_dot_product_attention): outputs and every gradient
   against the float64 values, relative to the largest magnitude (``bench.harness.rel_err``),
   tolerance 1e-4;
2. bf16 autocast: finite outputs and gradients, outputs within 0.05 of float32;
3. torch.compile(fullgraph=True): forward and backward equal to eager (1e-4);
4. step decoding equal to the full causal forward (1e-4);
5. speed: a training step (forward + backward) and inference of SRU++ vs an equal-width
   nn.TransformerEncoder (``bench.srupp``'s models) at L=512, B=16, d=1024, proj=256,
   4 layers (CUDA events, median of 20).

Writes summary.json into --out; exit status 1 if a correctness check fails.
"""
import argparse
import glob
import json
import sys
import traceback
from pathlib import Path
from typing import List, Optional

import torch

from bench.harness import make_timer, rel_err
from bench.srupp import build_models, causal_mask, time_models
from sru import Precision, SRUpp

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "srupp"


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


def small_model(device):
    torch.manual_seed(0)
    model = SRUpp(32, 32, 16, num_layers=3, num_heads=2, layer_norm=True).to(device)
    for cell in model.rnn_lst:
        cell.transform_module.alpha.data.fill_(0.5)
    return model


def check_autocast(device):
    model, x = small_model(device), torch.randn(20, 4, 32, device=device)
    want, _, _ = model(x, attn_mask=causal_mask(20, device))
    with Precision.BF16.autocast(device):
        h, c, _ = model(x, attn_mask=causal_mask(20, device))
    h.float().square().sum().backward()
    finite = all(torch.isfinite(p.grad).all() for p in model.parameters())
    return float((h.float() - want).detach().abs().max()), bool(finite and torch.isfinite(h).all())


def check_compile(device):
    model, x = small_model(device), torch.randn(20, 4, 32, device=device)

    def run(fn):
        model.zero_grad()
        h, c, _ = fn(x, attn_mask=causal_mask(20, device))
        (h.square().sum() + c.sum()).backward()
        return [h, c] + [p.grad.clone() for p in model.parameters()]
    eager = run(model)
    compiled = run(torch.compile(model, fullgraph=True))
    return max(rel_err(g, w) for g, w in zip(compiled, eager))


def check_decode(device):
    model, x = small_model(device).eval(), torch.randn(12, 3, 32, device=device)
    with torch.no_grad():
        want, _, _ = model(x, attn_mask=causal_mask(12, device))
    cache, steps = None, []
    for t in range(12):
        h, cache = model.decode(x[t], cache)
        steps.append(h)
    return rel_err(torch.stack(steps), want)


def speed(device, L=512, B=16, d=1024, proj=256, layers=4):
    """A training step and inference of SRU++ vs an equal-width Transformer (8 heads), single calls
    (CUDA events on GPU), median of 20 rounds (3 on CPU)."""
    models = {name: m.to(device) for name, m in build_models(d, proj, layers, heads=1, transformer_heads=8,
                                                               sru_baseline=False).items()}
    x = torch.randn(L, B, d, device=device, requires_grad=True)
    stats = time_models(models, x, causal_mask(L, device), make_timer(device), repeats=20 if device == "cuda" else 3,
                        warmup=3, min_ms=0.0)
    return {f"{name}/{mode}_ms": s["median_ms"] for mode, by_name in stats.items() for name, s in by_name.items()}


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", default="outputs/check_gpu_srupp")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--speed-shape", default="512,16,1024,256,4", help="L,B,d,proj,layers")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device visible; use --device cpu for the smoke test")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    """Run every check; 1 if one failed."""
    args = parse_args(argv)
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
