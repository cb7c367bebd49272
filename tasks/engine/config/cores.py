"""The CPUs this process may run on: what a thread count is checked against (config/checks.py) and what the
default thread count measures the free cores among (run/threads.py). Imports nothing heavy: the thread count
is chosen before torch is loaded."""
from __future__ import annotations

import os
from typing import Sequence


def allowed_cpus() -> Sequence[int]:
    """This process's CPU affinity; every CPU where the OS has no affinity."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def usable_cores() -> int:
    return len(allowed_cpus())
