"""bench.reliability.threads: the idle pair alone (``--only idle``: the default vs 2 threads, no busy loop),
the command the quiet-machine check of docs/speed/task_throughput.md runs."""
import subprocess
import sys

from conftest import ROOT

from bench.reliability.threads import SETTINGS, chosen_settings


def test_only_idle_runs_the_default_against_2_threads_with_no_busy_loop():
    assert chosen_settings("idle") == [("idle", "default", None), ("idle", "2 threads", 2)]
    assert chosen_settings("busy") == [("busy", "default", None), ("busy", "1 thread", 1)]
    assert chosen_settings() == SETTINGS


def test_rounds_below_1_are_refused_in_one_line():
    done = subprocess.run([sys.executable, "-m", "bench.reliability.threads", "--only", "idle", "--rounds", "0"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("threads.py: error: --rounds and --steps: expected at least 1, "
                                                     "received 0 and 150")
