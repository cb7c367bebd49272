"""How many CPU threads torch uses when ``trainer.num_threads`` is null (docs/design_notes.md#threads-on-a-shared-machine).

torch's default is one thread per core of the machine. On a shared machine that collapses: an OpenMP team
of two threads on two cores, with another process holding one of them, waits at every parallel region for
the thread that has no core, while its partner spins (measured: a training run at 190 tokens/s with
the default, 700 with one thread). So the default is the cores actually free at start: the cores this
process may run on (its affinity) minus those other processes keep busy, measured over a short window
of /proc/stat (the 1-minute load average lags a job that just started), at least one. A set
``trainer.num_threads`` is used as given, and so is ``OMP_NUM_THREADS`` (torchrun sets it per process). The choice is printed in the run's header.
"""
from __future__ import annotations

import os
import time
from typing import Dict, Optional, Sequence, Tuple

SAMPLE_S = 0.2      # the window over which busy cores are measured
BUSY_ROUNDING = 0.5  # a core busy more than half the window counts as taken


def _cpu_times(cpus: Sequence[int]) -> Optional[Dict[int, Tuple[int, int]]]:
    """cpu -> (busy jiffies, total jiffies) from /proc/stat; None where it cannot be read (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    times = {}
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            values = [int(x) for x in fields[:8]]
            idle = values[3] + values[4]  # idle + iowait
            times[int(name[3:])] = (sum(values) - idle, sum(values))
    return times


def allowed_cpus() -> Sequence[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def busy_cores(first: Dict[int, Tuple[int, int]], second: Dict[int, Tuple[int, int]]) -> float:
    """Cores' worth of busy time between two /proc/stat readings."""
    busy = 0.0
    for cpu, (b0, t0) in first.items():
        b1, t1 = second.get(cpu, (b0, t0))
        busy += (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
    return busy


def free_of(usable: int, busy: float) -> int:
    """Cores left to this process: a core busy more than half the window counts as taken; at least one."""
    return max(1, usable - int(busy + (1 - BUSY_ROUNDING)))


def free_cores(sample_s: float = SAMPLE_S) -> Tuple[int, int, float]:
    """(free cores, cores this process may use, cores busy with other processes) measured now."""
    cpus = allowed_cpus()
    first = _cpu_times(cpus)
    if not first:
        return len(cpus), len(cpus), 0.0
    time.sleep(sample_s)
    busy = busy_cores(first, _cpu_times(cpus) or {})
    return free_of(len(cpus), busy), len(cpus), busy


def choose_threads(configured: Optional[int]) -> Tuple[int, str]:
    """The thread count to use and the header line that says why."""
    if configured:
        return int(configured), f"{configured} CPU threads (trainer.num_threads={configured})"
    if os.environ.get("OMP_NUM_THREADS"):  # set by the user or the launcher (torchrun: 1 per process)
        import torch

        return torch.get_num_threads(), f"{torch.get_num_threads()} CPU threads (OMP_NUM_THREADS)"
    free, usable, busy = free_cores()
    return free, (f"{free} CPU threads: {usable} cores, {busy:.1f} busy with other processes at start "
                  f"(trainer.num_threads=N sets it)")
