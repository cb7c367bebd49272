"""A table's cells' CPU ms per training step at equal conditions: ``python scripts/bench_cells.py --table T
[--scale cpu] [--steps 10] [--rounds 5] [--threads 1] [--write]`` (tasks/paper/cell_bench.py)."""
from tasks.paper.cell_bench import main

if __name__ == "__main__":
    main()
