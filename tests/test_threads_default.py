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
    assert choose_threads(1) == (1, "1 CPU threads (trainer.num_threads=1)")
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


# ---- during training: the load of other processes is followed (FreeCoreWatch) ----------------------------

def _watch_with_looks(looks, current=2):
    """A watch on two cores whose looks at /proc/stat and its own CPU time are ``looks`` (t, busy jiffies of
    cpu 0 and 1 since boot, own CPU seconds), 100 jiffies per second."""
    from tasks.engine.run.threads import FreeCoreWatch

    scripted = iter([(t, {0: (b0, 100 * t), 1: (b1, 100 * t)}, own) for t, b0, b1, own in looks])
    watch = FreeCoreWatch.__new__(FreeCoreWatch)
    watch._look = lambda: next(scripted)
    watch.cpus, watch.current, watch.interval, watch.wanted = [0, 1], current, 1.0, None
    watch.mark = watch._look()
    return watch


def test_the_watch_drops_to_one_thread_when_another_process_takes_a_core_for_two_looks(monkeypatch):
    monkeypatch.setattr("tasks.engine.run.threads.time.monotonic", lambda: 1e9)  # every poll is due
    # both cores fully busy each second; this process used 1 core-second per second: another process the other
    watch = _watch_with_looks([(0, 0, 0, 0.0), (1, 100, 100, 1.0), (2, 200, 200, 2.0), (3, 300, 300, 3.0)])
    assert watch.poll() is None          # the first look that asks for 1 thread: not yet
    assert watch.poll() == 1             # the second agrees: 1 thread
    assert watch.poll() is None and watch.current == 1


def test_the_watch_keeps_the_count_while_only_this_process_is_busy(monkeypatch):
    monkeypatch.setattr("tasks.engine.run.threads.time.monotonic", lambda: 1e9)
    # both cores busy, all of it this process's own two threads: nothing to give back
    watch = _watch_with_looks([(0, 0, 0, 0.0), (1, 100, 100, 2.0), (2, 200, 200, 4.0)])
    assert watch.poll() is None and watch.poll() is None and watch.current == 2


def test_the_watch_takes_the_second_core_back_once_it_is_free(monkeypatch):
    monkeypatch.setattr("tasks.engine.run.threads.time.monotonic", lambda: 1e9)
    # one thread of ours on one core, the other core idle for two looks in a row
    watch = _watch_with_looks([(0, 0, 0, 0.0), (1, 100, 0, 1.0), (2, 200, 0, 2.0)], current=1)
    assert watch.poll() is None and watch.poll() == 2


def test_a_burst_between_looks_changes_nothing(monkeypatch):
    monkeypatch.setattr("tasks.engine.run.threads.time.monotonic", lambda: 1e9)
    # busy, idle, busy, idle: no two looks in a row agree on a change
    watch = _watch_with_looks([(0, 0, 0, 0.0), (1, 100, 100, 1.0), (2, 200, 100, 2.0), (3, 300, 200, 3.0),
                               (4, 400, 200, 4.0)])
    assert [watch.poll() for _ in range(4)] == [None] * 4 and watch.current == 2


def test_no_watch_where_the_thread_count_is_set(monkeypatch):
    from tasks.engine.run.threads import watch_for

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert watch_for(2) is None and watch_for(None) is not None
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert watch_for(None) is None


def test_more_threads_than_cores_are_capped_with_a_notice():
    usable = len(os.sched_getaffinity(0))
    threads, why = choose_threads(10000)
    assert threads == usable and f"trainer.num_threads=10000 capped to the {usable} cores" in why


class _WatchAskingForOneThread:
    def __init__(self):
        self.polls = 0

    def poll(self):
        self.polls += 1
        return 1 if self.polls == 2 else None


@pytest.mark.slow
def test_a_default_thread_run_sets_what_the_watch_asks_and_says_so(run_train, tmp_path, capsys, monkeypatch):
    from conftest import tiny_lm_overrides

    import tasks.engine.training.trainer as trainer

    watch = _WatchAskingForOneThread()
    monkeypatch.setattr(trainer, "watch_for", lambda configured: watch if configured is None else None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        run_train([*tiny_lm_overrides(steps=4), "trainer.num_threads=null", "test_after_training=false"], tmp_path)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert watch.polls == 4 and after == 1
    assert "[run] 1 CPU threads from step 2 on: the cores other processes leave free changed" in capsys.readouterr().out
