"""The verdict rules: counts, instruction tolerance, the timing noise model and its confirmation re-run."""

from __future__ import annotations

import pytest

from perfgate.gate import judge_with_confirmation
from perfgate.machine import Machine
from perfgate.metrics import METRICS, NOISE_K, Sample
from perfgate.verdict import Status, confirm, failed, judge, judge_all, noise_threshold

KERNEL_TIME = METRICS["kernel_time_ms"]
LAUNCHES = METRICS["kernel_launches"]
INSTRUCTIONS = METRICS["host_instructions"]


def timing(median: float, mad: float = 0.0) -> Sample:
    return Sample(median, mad, n=50)


def test_a_timing_inside_the_floor_passes():
    verdict = judge("w", KERNEL_TIME, timing(1.0, 0.001), timing(1.04, 0.001), True)
    assert verdict.status is Status.OK
    assert verdict.threshold == KERNEL_TIME.threshold


def test_the_noise_threshold_widens_with_the_spread_of_both_runs():
    quiet, noisy = timing(1.0, 0.001), timing(1.0, 0.04)
    assert noise_threshold(KERNEL_TIME, quiet, quiet) == KERNEL_TIME.threshold
    assert noise_threshold(KERNEL_TIME, noisy, noisy) == pytest.approx(NOISE_K * (2 * 0.04**2) ** 0.5)
    # 10% slower is a regression between quiet runs and noise between noisy ones.
    assert judge("w", KERNEL_TIME, quiet, timing(1.1, 0.001), True).status is Status.REGRESSION
    assert judge("w", KERNEL_TIME, noisy, timing(1.1, 0.044), True).status is Status.OK


def test_a_slow_timing_is_a_suspect_until_its_re_run():
    verdict = judge("w", KERNEL_TIME, timing(1.0), timing(1.2), True)
    assert verdict.status is Status.REGRESSION and verdict.suspect
    assert not confirm(verdict, timing(1.2)).suspect


def test_a_regression_the_re_run_confirms_fails_the_gate():
    verdict = confirm(judge("w", KERNEL_TIME, timing(1.0), timing(1.2), True), timing(1.15))
    assert verdict.status is Status.REGRESSION
    assert verdict.rerun_ratio == pytest.approx(1.15)
    assert failed([verdict], strict=False)


def test_a_regression_the_re_run_does_not_confirm_is_noise_and_passes():
    verdict = confirm(judge("w", KERNEL_TIME, timing(1.0), timing(1.2), True), timing(1.01))
    assert verdict.status is Status.NOISE
    assert not failed([verdict], strict=True)


def test_a_re_run_that_swings_the_other_way_does_not_confirm_a_regression():
    verdict = confirm(judge("w", KERNEL_TIME, timing(1.0), timing(1.2), True), timing(0.8))
    assert verdict.status is Status.NOISE


def test_one_more_kernel_launch_is_a_regression():
    verdict = judge("w", LAUNCHES, Sample.exact(3), Sample.exact(4), True)
    assert verdict.status is Status.REGRESSION
    assert not verdict.suspect  # counts are exact: no re-run
    assert failed([verdict], strict=False)


def test_one_more_byte_moved_is_a_regression():
    verdict = judge("w", METRICS["bytes_moved"], Sample.exact(4096), Sample.exact(4097), True)
    assert verdict.status is Status.REGRESSION


def test_an_improvement_passes_unless_strict():
    faster = confirm(judge("w", KERNEL_TIME, timing(1.0), timing(0.8), True), timing(0.8))
    fewer = judge("w", LAUNCHES, Sample.exact(4), Sample.exact(3), True)
    for verdict in (faster, fewer):
        assert verdict.status is Status.IMPROVEMENT
        assert not failed([verdict], strict=False)
        assert failed([verdict], strict=True)


def test_instruction_counts_fail_only_past_their_tolerance():
    base = Sample(1_000_000, 200, n=3)
    inside = Sample(1_000_000 * (1 + INSTRUCTIONS.threshold * 0.9), 200, n=3)
    outside = Sample(1_000_000 * (1 + INSTRUCTIONS.threshold * 1.1), 200, n=3)
    assert judge("w", INSTRUCTIONS, base, inside, True).status is Status.OK
    assert judge("w", INSTRUCTIONS, base, outside, True).status is Status.REGRESSION


def test_a_per_device_metric_without_this_devices_baseline_is_reported_not_judged():
    verdict = judge("w", KERNEL_TIME, None, timing(9.0), device_has_baseline=False)
    assert verdict.status is Status.NO_DEVICE_BASELINE
    assert judge("w", LAUNCHES, None, Sample.exact(9), False).status is Status.NO_BASELINE
    assert not failed([verdict], strict=True)


def test_compile_time_and_bandwidth_are_shown_but_never_judged():
    for name in ("compile_time_s", "bandwidth_fraction"):
        verdict = judge("w", METRICS[name], Sample.exact(1.0), Sample.exact(5.0), True)
        assert verdict.status is Status.INFO


def test_a_metric_nothing_could_measure_is_not_judged():
    assert judge("w", LAUNCHES, Sample.exact(1), None, True).status is Status.NOT_MEASURED


class RecordingTier:
    """Stands in for a tier: re-measures kernel time with the given values and records what it re-ran."""

    machine = Machine("gpu", "sm_90", "test device", None)

    def __init__(self, reruns: dict[str, float]):
        self.reruns = reruns
        self.remeasured: list[str] = []

    def remeasure(self, names):
        self.remeasured.extend(names)
        return {name: {"kernel_time_ms": timing(self.reruns[name])} for name in names}


def test_only_suspect_workloads_are_measured_again_and_judged_on_both_runs():
    expected = {name: {"kernel_time_ms": timing(1.0)} for name in ("steady", "blip", "slower")}
    measured = {
        "steady": {"kernel_time_ms": timing(1.01)},
        "blip": {"kernel_time_ms": timing(1.3)},
        "slower": {"kernel_time_ms": timing(1.3)},
    }
    tier = RecordingTier({"blip": 1.0, "slower": 1.28})
    verdicts = {v.workload: v for v in judge_with_confirmation(tier, measured, expected, True)}
    assert tier.remeasured == ["blip", "slower"]
    assert verdicts["steady"].status is Status.OK
    assert verdicts["blip"].status is Status.NOISE
    assert verdicts["slower"].status is Status.REGRESSION


def test_verdicts_cover_every_measured_metric_in_a_fixed_order():
    measured = {"w": {"host_instructions": Sample.exact(10), "kernel_launches": Sample.exact(1)}}
    names = [v.metric.name for v in judge_all(measured, {}, True)]
    assert names == ["kernel_launches", "host_instructions"]
