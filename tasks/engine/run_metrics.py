"""The metrics runs write and read: ``metrics.jsonl`` records, mean ± std summaries, and one metric made safe for
JSON (``json_safe``) or the console (``shown``).

Used by the trainer's plots, ``python -m tasks.engine.sweeps.collect``, the tasks' own commands (a
cross-validation) and the tests.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by None: JSON has no NaN (RFC 8259)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def shown(value: Any, fmt: str = ".4f") -> str:
    """A metric for the console: ``n/a`` when there is none (None, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value, fmt) if isinstance(value, (int, float)) else str(value)


def read_jsonl(path: Path) -> List[Dict[str, Any]]:
    """JSON objects of a .jsonl file; a partial last line (a run killed mid-write) is skipped, not fatal."""
    path = Path(path)
    lines = path.read_text().splitlines()
    records = []
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if line_no != len(lines):  # only the last line may be cut short by a crash
                raise ValueError(f"{path}:{line_no} is not JSON (a damaged metrics file); "
                                 f"delete or fix that line") from None
            print(f"warning: {path}:{line_no} is a partial last line (run killed mid-write), skipped")
    return records


def read_metrics(run_dir: Path, split: Optional[str] = None) -> List[Dict[str, Any]]:
    """The records of ``<run_dir>/metrics.jsonl`` (only those of ``split`` when given)."""
    records = read_jsonl(Path(run_dir) / "metrics.jsonl")
    return [r for r in records if split is None or r.get("split") == split]


def mean_std(values: Iterable[float]) -> Tuple[float, float]:
    """(mean, sample std) of the finite values; std 0.0 for one value, (nan, nan) for none."""
    kept = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not kept:
        return math.nan, math.nan
    return statistics.fmean(kept), statistics.stdev(kept) if len(kept) > 1 else 0.0


def format_mean_std(values: Iterable[float], digits: int = 2) -> str:
    """"m ± s" (one value: "m"; none: "n/a") for tables."""
    values = list(values)
    mean, std = mean_std(values)
    if math.isnan(mean):
        return "n/a"
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"
