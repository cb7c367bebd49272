"""Run bench_speed.py in several fresh processes and report each ratio per process and its median
over processes (why: bench/processes.py; docs/speed/layer_speed.md).

    python scripts/bench_processes.py --processes 8 -- --device cpu --threads 2 --repeats 30 \\
        --shapes paper --candidates gemm-bound,sru-cpu

Everything after ``--`` goes to bench_speed.py unchanged (except ``--out``, set per process to
OUT/process_<i>). Writes OUT/summary.md and OUT/summary.json.
"""
from bench.processes import main

if __name__ == "__main__":
    main()
