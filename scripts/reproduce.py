"""Reproduce the paper's tables, one (cell, seed) at a time, each leaving a committed record:
``python scripts/reproduce.py --scale cpu|paper [--all | --table T | --cell C] [--seeds 1,2,3] [-- overrides]``
(tasks/paper/reproduce.py)."""
from tasks.paper.reproduce import main

if __name__ == "__main__":
    main()
