"""Where metrics go: console, ``metrics.jsonl`` (always; plots and tests read it), CSV, wandb, TensorBoard;
and the training curves drawn from ``metrics.jsonl`` (``plot_curves``: train loss and the monitored
validation metric vs step).

Every logger takes ``log(record)`` where record = {"split": ..., "step": ..., "epoch": ..., metrics...}
and ``finish()``. Only rank 0 should construct loggers (``build_loggers(..., enabled=False)`` on others).
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from tasks.engine.errors import MissingPackageError
from tasks.engine.run.interrupts import write_text_atomic
from tasks.engine.run_metrics import json_safe, read_metrics

LOGGERS = ("csv", "wandb", "tensorboard", "none")


def drop_records_after(run_dir: Path, step: int) -> int:
    """Remove records with ``step`` > ``step`` from metrics.jsonl and metrics_<split>.csv; return how many.

    A run resumed from the checkpoint of step k repeats the steps after k: without this, the records
    logged between that checkpoint and a crash would appear twice. Files are rewritten atomically.
    """
    dropped = 0
    run_dir = Path(run_dir)
    jsonl = run_dir / "metrics.jsonl"
    if jsonl.is_file():
        lines = jsonl.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if not line.strip() or _step_of_json(line) <= step]
        dropped += len(lines) - len(kept)
        write_text_atomic(jsonl, "".join(kept))
    for path in sorted(run_dir.glob("metrics_*.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        if not rows or "step" not in rows[0]:
            continue
        col = rows[0].index("step")
        kept_rows = [rows[0]] + [r for r in rows[1:] if len(r) <= col or _as_step(r[col]) <= step]
        dropped += len(rows) - len(kept_rows)
        text = io.StringIO(newline="")
        csv.writer(text).writerows(kept_rows)
        write_text_atomic(path, text.getvalue())
    return dropped


def _as_step(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return -1.0  # not a record of a step: keep it


def _step_of_json(line: str) -> float:
    try:
        return _as_step(json.loads(line).get("step"))
    except ValueError:
        return float("inf")  # a line torn by a crash mid-write: drop it


class JsonlLogger:
    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.file = open(self.path, "a", encoding="utf-8")  # append: a resumed run continues the file

    def log(self, record: Mapping[str, Any]) -> None:
        self.file.write(json.dumps(json_safe(record), allow_nan=False) + "\n")  # NaN is not JSON: null
        self.file.flush()

    def finish(self) -> None:
        self.file.close()


class CsvLogger:
    """One CSV per split (columns differ between train and eval records)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.files: Dict[str, Any] = {}

    def log(self, record: Mapping[str, Any]) -> None:
        split = record.get("split", "train")
        path = self.run_dir / f"metrics_{split}.csv"
        if split not in self.files:
            new = not path.exists()
            f = open(path, "a", newline="", encoding="utf-8")
            writer = csv.DictWriter(f, fieldnames=list(record), extrasaction="ignore")
            if new:
                writer.writeheader()
            self.files[split] = (f, writer)
        f, writer = self.files[split]
        writer.writerow(record)
        f.flush()

    def finish(self) -> None:
        for f, _ in self.files.values():
            f.close()


class WandbLogger:
    def __init__(self, run_dir: Path, cfg: Mapping[str, Any], config: Dict[str, Any], run_name: str):
        try:
            import wandb
        except ImportError as err:
            raise MissingPackageError(f"logger=wandb needs the wandb package: pip install wandb (it is in the "
                                      f"[train] extra), or pick another logger=. ({err})") from err
        mode = cfg.get("mode") or os.environ.get("WANDB_MODE")
        if not mode:  # never block on a login prompt or a missing network: offline unless a key exists
            mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
        # A stable id per run directory makes a resumed run continue the same wandb run.
        run_id = "".join(c if c.isalnum() else "-" for c in Path(run_dir).resolve().as_posix()[-60:]).strip("-")
        self.wandb = wandb
        self.run = wandb.init(project=cfg["project"], entity=cfg.get("entity"), name=run_name,
                              dir=str(run_dir), config=config, mode=mode, tags=list(cfg.get("tags") or []),
                              id=run_id[-64:], resume="allow")

    def log(self, record: Mapping[str, Any]) -> None:
        split = record.get("split", "train")
        data = {f"{split}/{k}": v for k, v in record.items() if k not in ("split", "step")
                and isinstance(v, (int, float))}
        self.run.log(data, step=int(record["step"]))

    def finish(self) -> None:
        self.wandb.finish()


class TensorBoardLogger:
    """Event files under ``<run_dir>/tensorboard`` (or ``logger.log_dir``): one scalar per numeric
    metric, tagged ``<split>/<metric>`` at the record's step (as the wandb logger names them), and
    the run's config as text. View with ``tensorboard --logdir <run_dir>``."""

    def __init__(self, run_dir: Path, cfg: Mapping[str, Any], config: Dict[str, Any]):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:  # torch's wrapper needs the tensorboard package
            raise MissingPackageError("logger=tensorboard needs the tensorboard package: pip install tensorboard "
                              f"(it is in the [train] extra), or pick another logger=. ({err})") from err
        self.log_dir = Path(cfg.get("log_dir") or Path(run_dir) / "tensorboard")
        self.writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=cfg["flush_secs"])
        # Markdown: a fenced block keeps the config's indentation in TensorBoard's text tab.
        self.writer.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```", 0)

    def log(self, record: Mapping[str, Any]) -> None:
        split, step = record.get("split", "train"), int(record["step"])
        for key, value in record.items():
            if key not in ("split", "step") and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{split}/{key}", value, step)

    def finish(self) -> None:
        self.writer.close()


class Loggers:
    """Fan a record out to every logger; ``finish`` closes all of them even if one fails."""

    def __init__(self, loggers: List[Any], console: bool = True):
        self.loggers = loggers
        self.console = console
        self.echo = lambda line: print(line, flush=True)  # the trainer routes it around its progress bar

    def log(self, record: Mapping[str, Any]) -> None:
        if self.console:  # every record, train ones too: the loss reaches the console with or without a bar
            kind = "train" if record.get("split") == "train" else "eval"
            shown = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items()
                             if not (kind == "train" and k == "split"))
            self.echo(f"[{kind}] {shown}")
        for logger in self.loggers:
            logger.log(record)

    def finish(self) -> None:
        errors = []
        for logger in self.loggers:
            try:
                logger.finish()
            except Exception as err:  # keep closing the others
                errors.append(err)
        self.loggers = []
        if errors:
            raise errors[0]


def build_loggers(run_dir: Path, cfg: Mapping[str, Any], config: Dict[str, Any], run_name: str,
                  enabled: bool = True) -> Loggers:
    if not enabled:
        return Loggers([], console=False)
    name = cfg["name"]
    if name not in LOGGERS:
        raise ValueError(f"logger.name: expected one of {list(LOGGERS)}, received {name!r}. Pick one with logger=<name>.")
    loggers: List[Any] = [JsonlLogger(run_dir)]
    if name == "csv":
        loggers.append(CsvLogger(run_dir))
    elif name == "wandb":
        loggers.append(WandbLogger(run_dir, cfg, config, run_name))
    elif name == "tensorboard":
        loggers.append(TensorBoardLogger(run_dir, cfg, config))
    return Loggers(loggers)


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
