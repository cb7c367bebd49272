"""How many CPU threads torch uses when ``trainer.num_threads`` is null (docs/design_notes.md#threads-on-a-shared-machine).

torch's default is one thread per core of the machine. On a shared machine that collapses: an OpenMP team
of two threads on two cores, with another process holding one of them, waits at every parallel region for
the thread that has no core, while its partner spins (measured: a training run at 190 tokens/s with
the default, 700 with one thread). So the default is the cores actually free at start: the cores this
process may run on (its affinity) minus those other processes keep busy, measured over a short window
of /proc/stat (the 1-minute load average lags a job that just started), at least one. Load that comes or
goes later is followed during training (``FreeCoreWatch``): every ``RECHECK_S`` the cores other processes
kept busy since the last look (all busy time less this process's own CPU time) give the thread count again,
changed when two looks in a row agree. A set ``trainer.num_threads`` is used as given (more than the cores
this process may use: capped, with a notice), and so is ``OMP_NUM_THREADS`` (torchrun sets it per process).
The choice is printed in the run's header.
"""
from __future__ import annotations

import os
import time
from typing import Dict, Optional, Sequence, Tuple

from tasks.engine.config.cores import allowed_cpus, usable_cores

SAMPLE_S = 0.2      # the window over which busy cores are measured
BUSY_ROUNDING = 0.5  # a core busy more than half the window counts as taken
RECHECK_S = 5.0     # during training, how often the free cores are measured again


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
        usable = usable_cores()
        if int(configured) > usable:  # more threads than cores only wait for each other
            return usable, (f"{usable} CPU threads: trainer.num_threads={configured} capped to the {usable} cores "
                            f"this process may use")
        return int(configured), f"{configured} CPU threads (trainer.num_threads={configured})"
    if os.environ.get("OMP_NUM_THREADS"):  # set by the user or the launcher (torchrun: 1 per process)
        import torch

        return torch.get_num_threads(), f"{torch.get_num_threads()} CPU threads (OMP_NUM_THREADS)"
    free, usable, busy = free_cores()
    return free, (f"{free} CPU threads: {usable} cores, {busy:.1f} busy with other processes at start "
                  f"(trainer.num_threads=N sets it)")


class FreeCoreWatch:
    """For a training run on the default thread count: ``poll()`` after each step; at most every
    ``interval`` seconds it measures the cores other processes kept busy since its last look and returns
    the new thread count when two looks in a row ask for the same count, other than the current one
    (a passing burst of load changes nothing); else None."""

    def __init__(self, current: int, interval: float = RECHECK_S):
        self.cpus, self.current, self.interval = allowed_cpus(), current, interval
        self.mark = self._look()
        self.wanted: Optional[int] = None

    def _look(self):
        return time.monotonic(), _cpu_times(self.cpus), time.process_time()

    def others_busy(self, first, second) -> Optional[float]:
        """Cores' worth of busy time not ours between two looks; None where /proc/stat cannot be read."""
        (t0, cpu0, own0), (t1, cpu1, own1) = first, second
        if not cpu0 or not cpu1 or t1 <= t0:
            return None
        return max(0.0, busy_cores(cpu0, cpu1) - (own1 - own0) / (t1 - t0))

    def poll(self) -> Optional[int]:
        if time.monotonic() - self.mark[0] < self.interval:
            return None
        look = self._look()
        others = self.others_busy(self.mark, look)
        self.mark = look
        if others is None:
            return None
        want = free_of(len(self.cpus), others)
        agreed, self.wanted = want == self.wanted, want
        if want == self.current or not agreed:
            return None
        self.current = want
        return want


def watch_for(configured: Optional[int]) -> Optional[FreeCoreWatch]:
    """A watch for a run whose thread count is the default; None where it is set (config or environment)."""
    if configured or os.environ.get("OMP_NUM_THREADS"):
        return None
    import torch

    return FreeCoreWatch(torch.get_num_threads())
