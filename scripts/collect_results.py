"""Collect a sweep's (or repeated seeds') runs into one table and plot their validation curves:
``python scripts/collect_results.py <dir> [...] [--out DIR] [--metrics ...] [--ignore ...]`` (tasks/engine/collect_results.py)."""
from tasks.engine.collect_results import main

if __name__ == "__main__":
    main()
