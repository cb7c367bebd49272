"""Collect a sweep's (or repeated seeds') runs into one table and plot their validation curves:
``python scripts/collect_results.py <dir> [...] [--out DIR] [--metrics ...] [--ignore ...]`` (tasks/engine/sweeps/collect.py)."""
from tasks.engine.sweeps.collect import main

if __name__ == "__main__":
    main()
