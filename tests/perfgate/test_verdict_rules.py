"""The verdict rules: counts exactly, intervals of head / reference against each metric's threshold,
and what a gate judges against base and against the committed file."""

from __future__ import annotations

import pytest

from perfgate import baselines
from perfgate.gate import GateRequest, judge_samples
from perfgate.machine import Machine
from perfgate.metrics import METRICS, Sample
from perfgate.verdict import Status, failed, judge, pooled, ratio_interval

KERNEL_TIME = METRICS["kernel_time_ms"]
HOST_TIME = METRICS["host_relative"]
LAUNCHES = METRICS["kernel_launches"]
INSTRUCTIONS = METRICS["host_instructions"]


def processes(*medians: float) -> Sample:
    """One side's samples: the medians of its processes."""
    return pooled([Sample.of([m, m * 1.001, m * 0.999]) for m in medians])


def test_one_more_kernel_launch_or_byte_is_a_regression_and_one_fewer_an_improvement():
    assert judge("w", LAUNCHES, Sample.exact(3), Sample.exact(4), "base").status is Status.REGRESSION
    assert (
        judge("w", METRICS["bytes_moved"], Sample.exact(8), Sample.exact(9), "base").status
        is Status.REGRESSION
    )
    assert judge("w", LAUNCHES, Sample.exact(4), Sample.exact(3), "base").status is Status.IMPROVEMENT


def test_a_slowdown_whose_whole_interval_clears_the_threshold_is_a_regression():
    verdict = judge("w", KERNEL_TIME, processes(1.00, 1.01, 0.99), processes(1.10, 1.11, 1.09), "base")
    assert verdict.status is Status.REGRESSION
    assert verdict.interval[0] > 1 + KERNEL_TIME.threshold
    assert verdict.ratio == pytest.approx(1.10)


def test_unchanged_timings_with_process_to_process_spread_pass():
    verdict = judge("w", KERNEL_TIME, processes(1.00, 1.01, 0.99), processes(0.995, 1.005, 1.015), "base")
    assert verdict.status is Status.OK
    assert verdict.interval[0] < 1 < verdict.interval[1] <= 1 + KERNEL_TIME.threshold


def test_an_interval_that_straddles_the_threshold_is_inconclusive_and_does_not_fail():
    # adam_step on a lent H100: 2.63-3.37 ms between processes of one tree.
    verdict = judge("w", KERNEL_TIME, processes(2.63, 2.9, 3.37), processes(2.7, 3.1, 3.3), "base")
    assert verdict.status is Status.INCONCLUSIVE
    assert not failed([verdict], strict=True)


def test_a_speedup_whose_whole_interval_clears_the_threshold_is_an_improvement_that_fails_only_strict():
    verdict = judge("w", HOST_TIME, processes(60, 61, 59), processes(40, 41, 39), "base")
    assert verdict.status is Status.IMPROVEMENT
    assert not failed([verdict], strict=False) and failed([verdict], strict=True)


def test_the_interval_is_bootstrapped_over_both_sides_and_repeatable_by_seed():
    head, base = processes(1.05, 1.08, 1.02, 1.07), processes(1.0, 1.01, 0.97, 1.02)
    assert ratio_interval(head, base, seed=3) == ratio_interval(head, base, seed=3)
    low, high = ratio_interval(head, base, seed=3)
    assert 1.0 < low < 1.05 < high < 1.12


def test_against_one_committed_number_the_interval_comes_from_head_alone():
    low, high = ratio_interval(processes(1.0, 1.1, 1.2), Sample(1.0, 0.01, 50), seed=0)
    assert 1.0 <= low < high <= 1.2


def test_equal_samples_on_both_sides_give_a_point_interval():
    assert ratio_interval(Sample.of([5.0, 5.0]), Sample.of([4.0, 4.0]), seed=0) == (1.25, 1.25)


def test_instruction_counts_fail_only_when_the_interval_clears_their_one_percent():
    base = Sample.of([1_000_000, 1_000_500, 999_800])
    inside = Sample.of([1_005_000, 1_005_300, 1_004_900])
    outside = Sample.of([1_030_000, 1_030_400, 1_029_900])
    assert judge("w", INSTRUCTIONS, base, inside, "base").status is Status.OK
    assert judge("w", INSTRUCTIONS, base, outside, "base").status is Status.REGRESSION


def test_compile_time_and_bandwidth_are_shown_but_never_judged():
    for name in ("compile_time_s", "bandwidth_fraction"):
        verdict = judge("w", METRICS[name], Sample.exact(1.0), Sample.exact(5.0), "base")
        assert verdict.status is Status.INFO and verdict.ratio == 5.0


def test_a_metric_nothing_could_measure_or_nothing_to_compare_with_is_not_judged():
    assert judge("w", LAUNCHES, Sample.exact(1), None, "base").status is Status.NOT_MEASURED
    assert judge("w", LAUNCHES, None, Sample.exact(1), "base").status is Status.NO_BASELINE


H100 = Machine("gpu", "sm_90", "NVIDIA H100 80GB HBM3", None)


def measured(kernel_ms: float, launches: int) -> dict:
    return {
        "softmax": {
            "kernel_launches": [Sample.exact(launches)] * 3,
            "kernel_time_ms": [Sample.of([kernel_ms])] * 3,
        }
    }


def file_with(tmp_path, kernel_ms: float, launches: int):
    recorded = baselines.updated(
        None,
        H100,
        "fuser",
        {"softmax": {"kernel_launches": Sample.exact(launches), "kernel_time_ms": Sample.exact(kernel_ms)}},
    )
    baselines.write(tmp_path / "sm_90.json", recorded)


def test_an_ab_gate_judges_timings_against_base_and_counts_against_base_and_the_file(tmp_path):
    file_with(tmp_path, kernel_ms=0.5, launches=1)  # timings from another day: far faster than today's
    request = GateRequest("gpu", ["softmax"], against="main", baseline_dir=tmp_path)
    verdicts, _, _ = judge_samples(
        {"head": measured(1.0, 1), "base": measured(1.0, 1)}, H100, request, seed=0
    )
    assert [(v.metric.name, v.against, v.status) for v in verdicts] == [
        ("kernel_launches", "base", Status.OK),
        ("kernel_launches", "sm_90.json", Status.OK),
        ("kernel_time_ms", "base", Status.OK),
    ]


def test_without_a_base_timings_are_history_unless_absolute_is_asked_for(tmp_path):
    file_with(tmp_path, kernel_ms=0.5, launches=1)
    samples = {"head": measured(1.0, 1)}
    history, _, _ = judge_samples(
        samples, H100, GateRequest("gpu", ["softmax"], baseline_dir=tmp_path), seed=0
    )
    absolute, _, _ = judge_samples(
        samples, H100, GateRequest("gpu", ["softmax"], absolute=True, baseline_dir=tmp_path), 0
    )
    assert [v.status for v in history] == [Status.OK, Status.HISTORY]
    assert [v.status for v in absolute] == [Status.OK, Status.REGRESSION]
