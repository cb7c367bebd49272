"""bench.harness: what every benchmark shares (interleaved rounds, paired ratios, statistics, tables,
the relative error)."""
import pytest
import torch

from bench import harness


def test_summary_statistics_are_median_and_quartiles():
    stats = harness.summarize([0.004, 0.001, 0.002, 0.003, 0.005])  # seconds
    assert stats["median_ms"] == pytest.approx(3.0)
    assert (stats["q25_ms"], stats["q75_ms"]) == (pytest.approx(2.0), pytest.approx(4.0))
    assert stats["samples_ms"] == [4.0, 1.0, 2.0, 3.0, 5.0]  # round order kept, for pairing


def test_rounds_rotate_the_order_and_time_each_candidate_once_per_round():
    order = []
    fns = {name: (lambda n=name: order.append(n)) for name in "abc"}
    samples = harness.interleaved(fns, lambda fn, number: (fn(), float(number))[1], 6, {"a": 1, "b": 2, "c": 3})
    assert order == list("abc" "bca" "cab" "cba" "bac" "acb")  # rotations, then rotations of the reversed order
    assert samples == {"a": [1.0] * 6, "b": [2.0] * 6, "c": [3.0] * 6}
    rounds = ["".join(order[i:i + 3]) for i in range(0, 18, 3)]
    assert sum("ca" in r for r in rounds) == sum("ba" in r for r in rounds) == 2  # a follows each neighbour alike


def test_phases_run_one_after_another_inside_each_round():
    order = []
    phases = [{(n, "fwd"): (lambda n=n: order.append((n, "fwd"))) for n in "ab"},
              {(n, "bwd"): (lambda n=n: order.append((n, "bwd"))) for n in "ab"}]
    harness.interleaved_phases(phases, lambda fn, number: fn() or 0.0, 2)
    assert order == [("a", "fwd"), ("b", "fwd"), ("a", "bwd"), ("b", "bwd"),
                     ("b", "fwd"), ("a", "fwd"), ("b", "bwd"), ("a", "bwd")]


def test_calls_per_sample_fill_the_minimum_time():
    calls = []
    # a fake timer: every call "takes" 2 ms
    number = harness.calls_per_sample(lambda: calls.append(1), lambda fn, n: (fn(), 0.002)[1], min_ms=9, warmup=2)
    assert number == 5 and len(calls) == 3  # two warm-up calls and the calibration call
    assert harness.calls_per_sample(lambda: None, lambda fn, n: 1.0, min_ms=5, least=10) == 10


def test_paired_ratio_is_the_median_of_per_round_ratios():
    assert harness.paired_ratio([1.1, 3.3, 4.0], [1.0, 3.0, 2.0]) == pytest.approx(1.1)
    assert harness.paired_ratio({"samples_ms": [2.0]}, {"samples_ms": [1.0]}) == 2.0
    with pytest.raises(ValueError, match="equally long"):
        harness.paired_ratio([1.0, 2.0], [1.0])


def test_markdown_table_aligns_and_checks_row_width():
    text = harness.markdown_table(["a", "b"], [[1, "x"]], align="lr")
    assert text.splitlines() == ["| a | b |", "|---|---:|", "| 1 | x |"]
    with pytest.raises(ValueError, match="a row has 1 cells, the header 2"):
        harness.markdown_table(["a", "b"], [[1]])


def test_rel_err_is_relative_to_the_largest_reference_value():
    want = torch.tensor([2.0, -4.0])
    assert harness.rel_err(torch.tensor([2.0, -3.0]), want) == pytest.approx(0.25)
    assert harness.rel_err(None, torch.zeros(3)) == 0.0  # a missing gradient equals an all-zero one
    assert harness.rel_err(None, want) == float("inf")


def test_machine_info_names_the_machine_and_the_run():
    info = harness.machine_info("cpu", "python scripts/x.py --fast", repeats=3)
    assert info["command"] == "python scripts/x.py --fast" and info["repeats"] == 3
    assert info["cpu_model"] and info["threads"] == torch.get_num_threads() and info["torch"] == torch.__version__


def test_unknown_clock_is_one_clear_error():
    with pytest.raises(ValueError, match="expected 'wall' or 'cpu'"):
        harness.make_timer("cpu", "gpu")
