"""SRU++ speed: this repository's ``sru.SRUpp`` vs the official ``sru==3.0.0.dev6`` ``SRUpp``
(same weights, one process) vs an ``nn.TransformerEncoderLayer`` stack of equal width.

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

Candidates run interleaved round-robin (``bench.harness``); reported: median ms [IQR] per call
and, per round, the ratio to ``srupp`` (median over rounds). Writes srupp.json and srupp.md into
--out. ``bench.srupp_check`` times the same models on a GPU.
"""
import argparse
import sys
import json
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch
from torch import nn

from bench.decode import load_official
from bench.harness import (bench_parser, calls_per_sample, interleaved, machine_info, make_timer, markdown_table,
                           paired_ratio, summarize)

MODES = ("train_step", "forward")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = bench_parser(__doc__, threads=2, repeats=10, warmup=2, min_ms=50.0, length=128, batch=8)
    parser.add_argument("--official", default=None, metavar="DIR",
                        help="where `pip install --no-deps --target DIR sru==3.0.0.dev6` put it")
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
    return args


def causal_mask(length: int, device="cpu") -> torch.Tensor:
    return torch.full((length, length), float("-inf"), device=device).triu(1)


def build_models(hidden: int, proj: int, layers: int, heads: int, official=None,
                 transformer_heads: Optional[int] = None, sru_baseline: bool = True) -> Dict[str, nn.Module]:
    """SRU++ (and its official twin with the same weights), plain SRU, and a pre-norm Transformer of
    equal width (``transformer_heads``, default ``heads``), seeded so that every run builds the same."""
    from sru import SRU, SRUpp
    torch.manual_seed(0)
    models = {"srupp": SRUpp(hidden, hidden, proj, num_layers=layers, num_heads=heads)}
    if official is not None:
        twin = official.SRUpp(hidden, hidden, proj, num_layers=layers, num_heads=heads)
        twin.load_state_dict(models["srupp"].state_dict(), strict=True)  # same layout, same weights
        models["srupp-official"] = twin
    if sru_baseline:
        models["sru"] = SRU(hidden, hidden, num_layers=layers)
    layer = nn.TransformerEncoderLayer(hidden, transformer_heads or heads, 4 * hidden, dropout=0.0,
                                       norm_first=True)
    models["transformer"] = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
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


def time_models(models: Dict[str, nn.Module], x: torch.Tensor, mask: torch.Tensor, timer, repeats: int,
                warmup: int, min_ms: float) -> Dict[str, Dict[str, Dict]]:
    """mode -> candidate -> ``summarize``d samples, the candidates interleaved per mode."""
    calls = {name: make_calls(name, m, x, mask) for name, m in models.items()}
    stats = {}
    for mode in MODES:
        fns = {name: c[mode] for name, c in calls.items()}
        numbers = {name: calls_per_sample(fn, timer, min_ms, warmup) for name, fn in fns.items()}
        samples = interleaved(fns, timer, repeats, numbers)
        stats[mode] = {name: summarize(s) for name, s in samples.items()}
    return stats


def main(argv: Optional[List[str]] = None) -> List[Dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    official = None if args.official is None else load_official(args.official)
    import sru
    print(f"sru from {Path(sru.__file__).parent}; official: "
          f"{'not loaded' if official is None else official.__version__}", flush=True)
    models = build_models(args.hidden, args.proj, args.layers, args.heads, official)
    x = torch.randn(args.length, args.batch, args.hidden, requires_grad=True)
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    stats = time_models(models, x, causal_mask(args.length), make_timer("cpu", args.timer), args.repeats,
                        args.warmup, args.min_ms)
    rows = []
    for mode in MODES:
        for name, s in stats[mode].items():
            rows.append({"mode": mode, "candidate": name, "params": params[name], **s,
                         "vs_srupp": paired_ratio(s, stats[mode]["srupp"])})
            print(f"{mode:10s} {name:15s} {s['median_ms']:9.2f} ms  x{rows[-1]['vs_srupp']:.2f} of srupp",
                  flush=True)
    info = machine_info("cpu", timer=args.timer, repeats=args.repeats,
                        **{k: getattr(args, k) for k in ("length", "batch", "hidden", "proj", "layers", "heads")})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "srupp.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1))
    table = markdown_table(["mode", "candidate", "params", "median ms [IQR]", "time / srupp"], [
        [r["mode"], r["candidate"], f"{r['params']:,}", f"{r['median_ms']:.2f} [{r['q25_ms']:.2f}–{r['q75_ms']:.2f}]",
         f"{r['vs_srupp']:.2f}x"] for r in rows])
    text = (f"L={args.length} B={args.batch} d={args.hidden} proj={args.proj} layers={args.layers} "
            f"heads={args.heads}, {args.threads} threads, {args.repeats} rounds; {info['cpu_model']}\n\n{table}")
    (out / "srupp.md").write_text(text + "\n")
    print(text)
    return rows


if __name__ == "__main__":
    sys.exit(main() and 0)
