"""What the layer speed benchmark (``bench.speed``) writes: its Markdown table, the check against the
judged-shape targets, the figure and the per-operator profile of a training step."""
from pathlib import Path
from typing import Dict, List

import torch

from bench import registry
from bench.harness import fmt, markdown_table

PROFILED_STEPS = 3
GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}  # the unavoidable matmul work
GEMM_KERNEL_WORDS = ("gemm", "cutlass", "xmma")


def speed_table(rows: List[Dict]) -> str:
    header = ["shape", "dtype", "candidate", "fwd ms [IQR]", "fwd+bwd ms [IQR]", "fwd / GEMM",
              "fwd+bwd / GEMM", "speedup vs LSTM (fwd / fwd+bwd)"]
    cells = []
    for r in rows:
        head = [r["shape"]["label"], r["dtype"], r["candidate"]]
        if "error" in r:
            cells.append(head + [f"error: {r['error'].splitlines()[-1][:80]}", "", "", "", ""])
            continue
        f, t = r["forward"], r["train_step"]
        cells.append(head + [
            f"{f['median_ms']:.3f} [{f['q25_ms']:.3f}–{f['q75_ms']:.3f}]",
            f"{t['median_ms']:.3f} [{t['q25_ms']:.3f}–{t['q75_ms']:.3f}]",
            fmt(f["vs_gemm"], ".2f") + "x", fmt(t["vs_gemm"], ".2f") + "x",
            f"{fmt(f['speedup_vs_lstm'], '.2f')}x / {fmt(t['speedup_vs_lstm'], '.2f')}x"])
    return markdown_table(header, cells)


def judged_targets(rows: List[Dict]) -> str:
    """Markdown lines checking each SRU backend against the issue's judged-shape targets."""
    t = registry.JUDGED_TARGETS
    lines = []
    for r in rows:
        if (r["shape"]["label"] != registry.JUDGED_SHAPE.label or r["dtype"] != registry.JUDGED_DTYPE
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
