"""What every benchmark here shares, so each measures, compares and reports the same way.

- ``make_timer``: seconds per call of ``fn`` run ``number`` times (CUDA events on GPU, the wall clock or
  this thread's CPU time on CPU);
- ``calls_per_sample`` + ``interleaved``: warm up, calibrate, then time every candidate round-robin
  inside one process, the order rotating every round, so load from other processes hits all alike;
- ``summarize`` (median and quartiles) and ``paired_ratio`` (median over rounds of the per-round ratio:
  load that drifts during a run cancels, where a ratio of two medians would not);
- ``machine_info``: the machine a result was measured on (``tasks.engine.run.devices.machine``, the one
  description) with the command and the run's settings;
- ``bench_parser``: the command-line options every timing script shares;
- ``markdown_table``: every table the benchmarks print or write;
- ``rel_err``: the one relative error of a result against a reference.
"""
import argparse
import datetime
import gc
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple

import torch

from tasks.engine.run.devices import machine

ROOT = Path(__file__).resolve().parents[1]  # the checkout holding this package

Timer = Callable[[Callable[[], object], int], float]


def make_timer(device: str = "cpu", clock: str = "wall") -> Timer:
    """``timer(fn, number) -> seconds per call``: CUDA events on GPU (the host only queues kernels),
    perf_counter on CPU (ops run synchronously), or with clock="cpu" the calling thread's CPU time (time
    spent descheduled by other processes is not counted; only meaningful when one thread does the work)."""
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock: expected 'wall' or 'cpu', received {clock!r}")
    if device == "cuda":
        def cuda_timer(fn, number):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(number):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / number
        return cuda_timer
    now = time.thread_time if clock == "cpu" else time.perf_counter

    def timer(fn, number):
        start = now()
        for _ in range(number):
            fn()
        return (now() - start) / number
    return timer


def calls_per_sample(fn: Callable[[], object], timer: Timer, min_ms: float, warmup: int = 0,
                     least: int = 1) -> int:
    """Run ``fn`` ``warmup`` times untimed, then return how many calls make a sample last ``min_ms``
    (at least ``least``)."""
    for _ in range(warmup):
        fn()
    one_call = timer(fn, 1)
    return max(least, math.ceil(min_ms / 1e3 / max(one_call, 1e-9)))


def interleaved(fns: Mapping[Hashable, Callable[[], object]], timer: Timer, repeats: int,
                numbers: Optional[Mapping[Hashable, int]] = None) -> Dict[Hashable, List[float]]:
    """Seconds per call of each candidate in each of ``repeats`` rounds. Within a round every candidate
    takes one sample (``numbers[name]`` calls, default 1); the order rotates by one each round, and every
    other cycle of rotations runs the reversed order, so that a candidate follows each of its two
    neighbours equally often (with two candidates: the order flips). A candidate runs slower right after
    some others (their freed memory, caches): by rotation alone it would follow the same one in all but
    one round of each cycle."""
    return interleaved_phases([fns], timer, repeats, numbers)


def interleaved_phases(phases: Sequence[Mapping[Hashable, Callable[[], object]]], timer: Timer, repeats: int,
                       numbers: Optional[Mapping[Hashable, int]] = None) -> Dict[Hashable, List[float]]:
    """``interleaved`` where each round runs the phases one after another (e.g. every candidate's
    inference, then every candidate's training step), each phase's candidates in rotating order; keys
    are unique across phases. Garbage collection is off while timing, like timeit: a pause would land
    on whichever candidate runs then."""
    samples: Dict[Hashable, List[float]] = {name: [] for fns in phases for name in fns}
    gc.collect()
    gc.disable()
    try:
        for rep in range(repeats):
            for fns in phases:
                names = list(fns)
                cycle, shift = divmod(rep, max(len(names), 1))
                names = names[::-1] if cycle % 2 else names
                for name in names[shift:] + names[:shift]:
                    samples[name].append(timer(fns[name], 1 if numbers is None else numbers[name]))
    finally:
        gc.enable()
    return samples


def summarize(samples_s: Sequence[float]) -> Dict[str, object]:
    """Median and quartiles in ms; the samples stay in round order so that ratios can be paired."""
    # round first and take every statistic from the rounded samples, so that the reported median and
    # quartiles are exactly those of the reported samples (an unrounded q25 can sit 1e-5 below them)
    ms = [round(s * 1e3, 4) for s in samples_s]
    if len(ms) >= 2:
        q25, _, q75 = statistics.quantiles(ms, n=4, method="inclusive")
    else:
        q25 = q75 = ms[0]
    return {"median_ms": statistics.median(ms), "q25_ms": q25, "q75_ms": q75,
            "samples_ms": ms}


def step_budget(parts: Mapping[str, Callable[[], object]], whole: str, derived: Callable[[Dict[str, float]], Dict[str, float]],
                timer: Timer, repeats: int, min_ms: float, path: str) -> List[Dict]:
    """Where one step's time goes: every part (``whole`` among them) timed alone, interleaved in ``repeats``
    rounds (median µs per call, ``share`` of the whole), then the rows ``derived(us)`` computes from them
    (differences of nested parts, marked '=')."""
    numbers = {name: calls_per_sample(fn, timer, min_ms, 50, least=20) for name, fn in parts.items()}
    samples = interleaved(parts, timer, repeats, numbers)
    us = {name: summarize(samples[name])["median_ms"] * 1e3 for name in parts}
    rows = [{"part": name, "us": value, "share": value / us[whole], "path": path} for name, value in us.items()]
    return rows + [{"part": f"= {name}", "us": value, "share": value / us[whole]}
                   for name, value in derived(us).items()]


def paired_ratio(mine: Mapping, other: Mapping) -> float:
    """Median over rounds of mine/other (``summarize`` results, or plain lists of samples), each
    round's two samples taken moments apart: load that drifts during the run cancels out."""
    a = mine["samples_ms"] if isinstance(mine, Mapping) else mine
    b = other["samples_ms"] if isinstance(other, Mapping) else other
    if len(a) != len(b) or not a:
        raise ValueError(f"paired_ratio: expected two equally long, non-empty sample lists, "
                         f"received {len(a)} and {len(b)} samples")
    return statistics.median(x / y for x, y in zip(a, b))


def bench_parser(doc: str, threads: int, repeats: int, **options: float) -> argparse.ArgumentParser:
    """The argument parser a timing script starts from: described by its docstring's first paragraph, with
    ``--threads`` and ``--repeats``, then one option per keyword (``min_ms=50.0`` -> ``--min-ms``, typed as
    its default: the shape and timing knobs), in that order."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=threads)
    parser.add_argument("--repeats", type=int, default=repeats)
    for name, default in options.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return parser


def machine_info(device: str = "cpu", command: Optional[str] = None, **extra) -> Dict[str, object]:
    """Where and how a result was measured: CPU, threads, torch, Python, device (GPU name and CUDA on
    GPU), the command line and the date, plus ``extra`` (the run's settings)."""
    described = machine()  # the one description (tasks/engine/run/devices.py), under the keys bench results use
    info = {"cpu_model": described["cpu"], "logical_cpus": described["logical_cpus"], "threads": described["threads"],
            "torch": described["torch"], "python": described["python"], "device": device,
            "command": command or this_command(),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
    info.update(extra)
    return info


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> str:
    """A Markdown table; ``align`` has one letter per column, "r" for right-aligned (default left)."""
    header = list(header)
    rules = ["---:" if (align[i:i + 1] == "r") else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rules) + "|"]
    for row in rows:
        row = [str(cell) for cell in row]
        if len(row) != len(header):
            raise ValueError(f"markdown_table: a row has {len(row)} cells, the header {len(header)}: {row}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def fmt(value: Optional[float], spec: str, suffix: str = "") -> str:
    """``value`` formatted, or an en dash when it was not measured."""
    return "–" if value is None else format(value, spec) + suffix


def module_command(module: str, *args: str) -> Tuple[List[str], Dict[str, str]]:
    """The command line and environment that run ``python -m <module>`` in a fresh process with this
    Python, importing this checkout's packages whatever the working directory."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return [sys.executable, "-m", module, *args], dict(os.environ, PYTHONPATH=path)


def this_command() -> str:
    """How this process was started, as a user would type it: ``python -m bench.speed --threads 2`` for a
    module run with ``-m``, else the script's path and its arguments."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None and spec.name else None
    start = ["python", "-m", name] if name else [Path(sys.argv[0]).as_posix()]
    return " ".join(start + sys.argv[1:])


def rel_err(got, want) -> float:
    """max |got - want| / max |want| in float64 (a missing gradient equals an all-zero one): the test
    suite's measure (``sru.testing.rel_err``), imported when first used so that the timing
    benchmarks still run while the layer package is broken."""
    from sru.testing import rel_err as measure

    return measure(got, want)
