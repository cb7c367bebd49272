"""trainer.keep_freed_memory (tasks/engine/run/memory.py): a decode step allocates a few large outputs and frees
them together; by default glibc then trims its heap and the next step faults every page in again, after
keep_freed_memory() the freed memory serves the next step."""
import platform
import subprocess
import sys

import pytest
from conftest import compose

STEPS = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from tasks.engine.run.memory import keep_freed_memory
    assert keep_freed_memory()
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # noqa: E731
def step():  # logits, their log-softmax, a shifted copy: three 16 MB buffers, freed together
    logits = np.ones(2 << 20)
    log_probs = np.log(logits)
    return float((log_probs + 1.0)[0])
step()
before = faults()
for _ in range(10):
    step()
print((faults() - before) / 10)
"""


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_memory_serves_the_next_step():
    def faults_per_step(mode):
        out = subprocess.run([sys.executable, "-c", STEPS, mode], capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    # glibc's default: the heap is trimmed, its pages fault in again (here ~1,500 a step: 4 KB and 2 MB pages)
    default, kept = faults_per_step("default"), faults_per_step("keep")
    assert kept <= 10 < default / 10, (default, kept)


def test_keep_freed_memory_is_a_trainer_key_on_by_default():
    assert compose(["task=lm"]).trainer.keep_freed_memory is True
