"""SRU++ speed: this repository's ``sru.SRUpp`` vs the official ``sru==3.0.0.dev6`` ``SRUpp``
(same weights, one process) vs an ``nn.TransformerEncoderLayer`` stack of equal width.

    pip install --no-deps --target /tmp/sru3 sru==3.0.0.dev6
    PYTHONPATH=. python scripts/bench_srupp.py --official /tmp/sru3 [--threads 2] [--repeats 10]
                                               [--threads 1 --timer cpu]   (a shared machine)

Times a training step (forward + backward into parameters and input, train mode, no dropout)
and inference (forward under no_grad, eval mode) of a causal language-model-like block:
input (L, B, d), causal attention mask, ``--layers`` layers. Candidates:

    srupp            sru.SRUpp (fused CPU recurrence, scaled_dot_product_attention)
    srupp-official   the official package, loaded from --official as a separate module (its
                     CPU training step runs its recurrence as a Python loop: it has no CPU
                     backward kernel; its inference uses its C++ CPU kernel)
    sru              sru.SRU of the same width and depth (no attention), for scale
    transformer      nn.TransformerEncoderLayer(d, heads, 4d feed-forward, norm_first) x layers,
                     causal mask

Candidates run interleaved round-robin (bench_speed.py's method); reported: median ms [IQR]
per call and, per round, the ratio to ``srupp`` (median over rounds). Writes srupp.json and
srupp.md into --out.
"""
import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch
from torch import nn

import bench_decode
from bench_speed import machine_info, make_timer, paired_ratio, summarize


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--official", default=None, metavar="DIR",
                        help="where `pip install --no-deps --target DIR sru==3.0.0.dev6` put it")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--min-ms", type=float, default=50.0)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256, help="d: SRU++ hidden = Transformer d_model")
    parser.add_argument("--proj", type=int, default=64, help="SRU++ attention width (paper: d/4)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--timer", default="wall", choices=["wall", "cpu"],
                        help="cpu: this thread's CPU time (only with --threads 1): time spent "
                             "descheduled by other processes on a shared machine is not counted")
    parser.add_argument("--out", default="outputs/bench_srupp")
    args = parser.parse_args(argv)
    if args.timer == "cpu" and args.threads != 1:
        parser.error("--timer cpu: only with --threads 1 (other threads' time is not seen)")
    args.device = "cpu"
    return args


def causal_mask(length: int) -> torch.Tensor:
    return torch.full((length, length), float("-inf")).triu(1)


def build_models(args, official) -> Dict[str, nn.Module]:
    from sru import SRU, SRUpp
    torch.manual_seed(0)
    d = args.hidden
    models = {"srupp": SRUpp(d, d, args.proj, num_layers=args.layers, num_heads=args.heads)}
    if official is not None:
        twin = official.SRUpp(d, d, args.proj, num_layers=args.layers, num_heads=args.heads)
        twin.load_state_dict(models["srupp"].state_dict(), strict=True)  # same layout, same weights
        models["srupp-official"] = twin
    models["sru"] = SRU(d, d, num_layers=args.layers)
    layer = nn.TransformerEncoderLayer(d, args.heads, 4 * d, dropout=0.0, norm_first=True)
    models["transformer"] = nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False)
    return models


def make_calls(name: str, model: nn.Module, x: torch.Tensor, mask: torch.Tensor
               ) -> Dict[str, Callable[[], None]]:
    def run():
        if name.startswith("srupp"):
            return model(x, attn_mask=mask)[0]
        if name == "sru":
            return model(x)[0]
        return model(x, mask=mask, is_causal=True)

    def train_step():
        model.train()
        model.zero_grad(set_to_none=True)
        x.grad = None
        run().square().mean().backward()

    def forward():
        model.eval()
        with torch.no_grad():
            run()
    return {"train_step": train_step, "forward": forward}


def main(argv: Optional[List[str]] = None) -> List[Dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    official = None if args.official is None else bench_decode.load_official(args.official)
    import sru
    print(f"sru from {Path(sru.__file__).parent}; official: "
          f"{'not loaded' if official is None else official.__version__}", flush=True)
    models = build_models(args, official)
    x = torch.randn(args.length, args.batch, args.hidden, requires_grad=True)
    mask = causal_mask(args.length)
    calls = {name: make_calls(name, m, x, mask) for name, m in models.items()}
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    timer = make_timer("cpu", args.timer)
    rows = []
    for mode in ("train_step", "forward"):
        number = {}
        for name in calls:  # warm-up, then calls per sample so that a sample lasts --min-ms
            for _ in range(args.warmup):
                calls[name][mode]()
            once = timer(calls[name][mode], 1)
            number[name] = max(1, int(args.min_ms / 1e3 / max(once, 1e-9)))
        samples = {name: [] for name in calls}
        for r in range(args.repeats):
            order = list(calls)[r % len(calls):] + list(calls)[:r % len(calls)]
            for name in order:
                samples[name].append(timer(calls[name][mode], number[name]))
        stats = {name: summarize(s) for name, s in samples.items()}
        for name in calls:
            rows.append({"mode": mode, "candidate": name, "params": params[name], **stats[name],
                         "vs_srupp": paired_ratio(stats[name], stats["srupp"])})
            print(f"{mode:10s} {name:15s} {stats[name]['median_ms']:9.2f} ms  "
                  f"x{rows[-1]['vs_srupp']:.2f} of srupp", flush=True)
    info = machine_info(args)
    info.update({k: getattr(args, k) for k in ("length", "batch", "hidden", "proj", "layers", "heads")})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "srupp.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1))
    lines = [f"L={args.length} B={args.batch} d={args.hidden} proj={args.proj} "
             f"layers={args.layers} heads={args.heads}, {args.threads} threads, "
             f"{args.repeats} rounds; {info['cpu_model']}", "",
             "| mode | candidate | params | median ms [IQR] | time / srupp |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['candidate']} | {r['params']:,} | {r['median_ms']:.2f} "
                     f"[{r['q25_ms']:.2f}–{r['q75_ms']:.2f}] | {r['vs_srupp']:.2f}x |")
    (out / "srupp.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    sys.exit(main() and 0)
