"""End-to-end training throughput per task: SRU vs its baseline on the same batches, in one process.

    python scripts/bench_tasks.py [--tasks all | lm,lm_char,classification,squad,translation,speech,ptb-paper]
                                  [--steps 10] [--rounds 3] [--threads 2] [--precision fp32|bf16]
                                  [--override KEY=VALUE ...] [--out DIR]

Writes bench_tasks.json and bench_tasks.md into --out. The method (model pairs, the step-time
breakdown): bench/task_throughput.py.
"""
from bench.task_throughput import main

if __name__ == "__main__":
    main()
