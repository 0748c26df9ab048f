"""The verdict rules: counts, instruction tolerance, the timing noise model and its confirmation re-runs."""

from __future__ import annotations

import pytest

from perfgate.gate import judge_with_confirmation
from perfgate.gpu_validation import gate_once
from perfgate.machine import Machine
from perfgate.metrics import METRICS, NOISE_K, Sample
from perfgate.verdict import Status, confirm, failed, judge, judge_all, noise_threshold

KERNEL_TIME = METRICS["kernel_time_ms"]
HOST_TIME = METRICS["host_time_us"]
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


def test_a_host_time_suspect_needs_a_second_re_run_after_a_first_that_confirms_it():
    verdict = confirm(judge("w", HOST_TIME, timing(1.0), timing(1.45), True), timing(1.45))
    assert verdict.status is Status.REGRESSION and verdict.suspect
    assert not confirm(verdict, timing(1.45)).suspect


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


class ScriptedTier:
    """Stands in for a GPU tier: each (re-)measurement of a workload returns the next of its scripted
    timings, as ratios to a baseline of 1.0; it records every workload it measured."""

    machine = Machine("gpu", "sm_90", "test device", None)

    def __init__(self, script: dict[str, list[dict[str, float]]]):
        self.script = {name: iter(runs) for name, runs in script.items()}
        self.measured: list[str] = []

    def remeasure(self, names):
        self.measured.extend(names)
        return {name: {m: timing(ratio) for m, ratio in next(self.script[name]).items()} for name in names}


def gate_with(script: dict[str, list[dict[str, float]]]) -> tuple[dict[str, dict], ScriptedTier]:
    """One gate run as `perfgate.gpu_validation` runs it (first pass, then confirmation re-runs) on
    scripted timings; its verdicts by workload and metric, and the tier, for what it measured."""
    tier = ScriptedTier(script)
    expected = {name: dict.fromkeys(runs[0], timing(1.0)) for name, runs in script.items()}
    verdicts = gate_once(tier, sorted(script), expected)
    by_name: dict[str, dict] = {}
    for verdict in verdicts:
        by_name.setdefault(verdict.workload, {})[verdict.metric.name] = verdict
    return by_name, tier


STEADY_KERNELS = 1.0
HOST_SPIKE = 1.449  # what the one false alarm on the H200 measured, in the first pass and its re-run


def test_a_host_time_spike_in_the_first_pass_and_only_one_of_two_re_runs_passes_as_noise():
    runs = [
        {"kernel_time_ms": STEADY_KERNELS, "host_time_us": ratio} for ratio in (HOST_SPIKE, HOST_SPIKE, 1.0)
    ]
    verdicts, tier = gate_with({"softmax": runs})
    host = verdicts["softmax"]["host_time_us"]
    assert host.status is Status.NOISE
    assert host.rerun_ratios == (pytest.approx(HOST_SPIKE), pytest.approx(1.0))
    assert tier.measured == ["softmax"] * 3  # the first pass, then two re-runs
    assert not failed([v for by_metric in verdicts.values() for v in by_metric.values()], strict=True)


def test_a_host_time_spike_the_first_re_run_does_not_repeat_is_settled_without_a_second():
    runs = [{"kernel_time_ms": STEADY_KERNELS, "host_time_us": ratio} for ratio in (HOST_SPIKE, 1.0)]
    verdicts, tier = gate_with({"softmax": runs})
    assert verdicts["softmax"]["host_time_us"].status is Status.NOISE
    assert tier.measured == ["softmax"] * 2


def test_a_persistent_host_time_slowdown_fails_after_both_re_runs_confirm_it():
    runs = [{"kernel_time_ms": STEADY_KERNELS, "host_time_us": ratio} for ratio in (1.3, 1.28, 1.31)]
    verdicts, tier = gate_with({"softmax": runs})
    host = verdicts["softmax"]["host_time_us"]
    assert host.status is Status.REGRESSION
    assert host.rerun_ratios == (pytest.approx(1.28), pytest.approx(1.31))
    assert host.rerun_ratio == pytest.approx(1.31)
    assert tier.measured == ["softmax"] * 3
    assert failed([host], strict=False)


def test_a_host_time_improvement_stands_only_if_both_re_runs_are_faster_too():
    faster = [{"kernel_time_ms": STEADY_KERNELS, "host_time_us": ratio} for ratio in (0.7, 0.72, 0.71)]
    blip = [{"kernel_time_ms": STEADY_KERNELS, "host_time_us": ratio} for ratio in (0.7, 0.72, 1.0)]
    verdicts, _ = gate_with({"faster": faster, "blip": blip})
    assert verdicts["faster"]["host_time_us"].status is Status.IMPROVEMENT
    assert verdicts["blip"]["host_time_us"].status is Status.NOISE


@pytest.mark.parametrize(
    ("kernel_ratios", "status"),
    [((1.3, 1.28), Status.REGRESSION), ((1.3, 1.01), Status.NOISE), ((0.8, 0.81), Status.IMPROVEMENT)],
)
def test_kernel_time_is_still_settled_by_a_single_re_run(kernel_ratios, status):
    # A third timing is scripted, so a second kernel-time re-run would be taken if the rule asked for one.
    ratios = (*kernel_ratios, kernel_ratios[0])
    verdicts, tier = gate_with({"chain": [{"kernel_time_ms": r, "host_time_us": 1.0} for r in ratios]})
    kernel = verdicts["chain"]["kernel_time_ms"]
    assert kernel.status is status
    assert kernel.rerun_ratios == (pytest.approx(kernel_ratios[1]),)
    assert tier.measured == ["chain"] * 2


def test_each_round_re_measures_only_the_workloads_that_still_have_a_suspect():
    verdicts, tier = gate_with(
        {
            "kernel_slower": [{"kernel_time_ms": r, "host_time_us": 1.0} for r in (1.3, 1.3, 1.3)],
            "host_slower": [{"kernel_time_ms": 1.0, "host_time_us": r} for r in (1.3, 1.3, 1.3)],
            "steady": [{"kernel_time_ms": 1.0, "host_time_us": 1.0}],
        }
    )
    assert tier.measured == [
        "host_slower",
        "kernel_slower",
        "steady",
        "host_slower",
        "kernel_slower",
        "host_slower",
    ]
    assert verdicts["kernel_slower"]["kernel_time_ms"].status is Status.REGRESSION
    assert verdicts["host_slower"]["host_time_us"].status is Status.REGRESSION
    assert verdicts["steady"]["host_time_us"].status is Status.OK
