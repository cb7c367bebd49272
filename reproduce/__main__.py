"""``python -m reproduce --scale cpu|paper [--all | --table T | --cell C] [--seeds 1,2,3] [-- overrides]``:
run the paper's table cells (reproduce/run_cells.py)."""
from reproduce.run_cells import main

main()
