"""trainer.num_threads=null picks the cores free at start (tasks/engine/run/threads.py; issue 50, item 9), and
the run's header says what it chose. The speed it keeps is a benchmark (docs/benchmarks.md), not a test."""
from __future__ import annotations

import os

import pytest
import torch
from conftest import compose

from tasks.engine.run.context import open_run
from tasks.engine.run.threads import busy_cores, choose_threads, free_cores, free_of


@pytest.mark.parametrize("usable,busy,free", [(2, 0.0, 2), (2, 0.4, 2), (2, 1.0, 1), (2, 1.6, 1), (2, 2.0, 1),
                                              (8, 3.2, 5), (1, 1.0, 1)])
def test_a_core_busy_more_than_half_the_window_is_taken(usable, busy, free):
    assert free_of(usable, busy) == free


def test_busy_cores_add_up_per_cpu():
    first = {0: (100, 1000), 1: (0, 1000)}
    second = {0: (200, 1100), 1: (50, 1100)}  # cpu 0 fully busy, cpu 1 half busy over 100 jiffies
    assert busy_cores(first, second) == pytest.approx(1.5)


def test_the_measurement_reads_this_machine():
    free, usable, busy = free_cores(0.05)
    assert usable == len(os.sched_getaffinity(0)) and 1 <= free <= usable and 0.0 <= busy <= usable + 0.01


def test_a_set_num_threads_is_used_as_given_and_the_header_says_the_choice(tmp_path, capsys, monkeypatch):
    assert choose_threads(3) == (3, "3 CPU threads (trainer.num_threads=3)")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    cfg = compose(["trainer.num_threads=null", "trainer.device=cpu"])
    try:
        with open_run(cfg, None, lock=False):
            chosen = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    header = capsys.readouterr().out
    assert f"[run] {chosen} CPU threads: {len(os.sched_getaffinity(0))} cores, " in header
    assert "busy with other processes at start (trainer.num_threads=N sets it)" in header
