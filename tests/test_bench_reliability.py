"""bench.reliability: threads' idle pair alone (``--only idle``: the default vs 2 threads, no busy loop, the
command the quiet-machine check of docs/speed/task_throughput.md runs), and the arguments both benches refuse
before any work."""
import subprocess
import sys

import pytest

from conftest import ROOT

from bench.reliability.threads import SETTINGS, chosen_settings


def test_only_idle_runs_the_default_against_2_threads_with_no_busy_loop():
    assert chosen_settings("idle") == [("idle", "default", None), ("idle", "2 threads", 2)]
    assert chosen_settings("busy") == [("busy", "default", None), ("busy", "1 thread", 1)]
    assert chosen_settings() == SETTINGS


@pytest.mark.slow
def test_rounds_below_1_are_refused_in_one_line():
    done = subprocess.run([sys.executable, "-m", "bench.reliability.threads", "--only", "idle", "--rounds", "0"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("threads.py: error: --rounds and --steps: expected at least 1, "
                                                     "received 0 and 150")


@pytest.mark.slow
@pytest.mark.parametrize("args, line", [
    (["--minutes", "-5"], "long_audio.py: error: --minutes: expected lengths > 0, received [-5.0]"),
    (["--forms"], "long_audio.py: error: nothing to measure: give --runs, or leave --forms out (the built model, "
                  "both forms)"),
    (["--forms", "--runs", "/nonexistent/model.pt"],
     "long_audio.py: error: --runs: no such run directory or model file: /nonexistent/model.pt"),
])
def test_long_audio_refuses_what_would_measure_nothing_before_writing_audio(args, line):
    """Were: no rows and status 0 (--minutes -5, --forms alone); a failure after minutes of WAV writing."""
    done = subprocess.run([sys.executable, "-m", "bench.reliability.long_audio", *args], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == line
