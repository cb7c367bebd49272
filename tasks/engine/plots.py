"""Training curves from ``metrics.jsonl``: train loss and the monitored validation metric vs step."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from tasks.engine.results import read_metrics


def plot_curves(run_dir: Path, monitor: str, out: Optional[Path] = None) -> Path:
    import matplotlib
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    train = read_metrics(run_dir, "train")
    valid = read_metrics(run_dir, "valid")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot([r["step"] for r in train], [r["loss"] for r in train], label="train")
    axes[0].plot([r["step"] for r in valid], [r["loss"] for r in valid], "o-", label="valid")
    axes[0].set(xlabel="step", ylabel="loss", title="loss")
    axes[0].legend()
    axes[1].plot([r["step"] for r in valid if monitor in r], [r[monitor] for r in valid if monitor in r], "o-")
    axes[1].set(xlabel="step", ylabel=monitor, title=f"valid {monitor}")
    fig.tight_layout()
    out = Path(out or Path(run_dir) / "curves.png")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
