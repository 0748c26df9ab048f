"""Verdicts: each workload's metrics against the baseline, by the metric's rule (`perfgate.metrics`).

- exact (kernel launches, bytes moved): any increase is a regression, any decrease an improvement.
- tolerance (instruction counts): a regression past the metric's fraction, an improvement below it.
- noise (kernel time, host time): the threshold is max(floor, NOISE_K × √(s_base² + s_now²)), where s is
  a run's MAD / median. A timing outside it is a suspect: its workload is measured again, up to the
  metric's `reruns` times (kernel time once, host time twice), and the verdict stands only if every
  re-run is outside the threshold the same way; the first re-run inside it makes the suspect noise.

Regressions fail the gate. Improvements pass with a suggestion to rebaseline, and fail only under
`strict` (the baseline should then describe the code). A metric with no baseline is reported, never
judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

from perfgate.metrics import METRICS, NOISE_K, Measurements, Metric, Rule, Sample


class Status(Enum):
    OK = "ok"
    REGRESSION = "REGRESSION"
    IMPROVEMENT = "improvement"
    NOISE = "ok (re-run inside threshold)"
    NO_BASELINE = "no baseline"
    NO_DEVICE_BASELINE = "no baseline for this device"
    NOT_MEASURED = "not measured"
    INFO = "info"


def _ratio(now: Sample | None, baseline: Sample | None) -> float | None:
    if now is None or baseline is None:
        return None
    if baseline.median == 0:
        return 1.0 if now.median == 0 else math.inf
    return now.median / baseline.median


@dataclass(frozen=True)
class Verdict:
    workload: str
    metric: Metric
    baseline: Sample | None
    now: Sample | None
    status: Status
    threshold: float | None = None  # the allowed relative change, for judged metrics
    reruns: tuple[Sample, ...] = ()  # the confirmation re-runs of a suspect timing, in order

    @property
    def ratio(self) -> float | None:
        return _ratio(self.now, self.baseline)

    @property
    def rerun_ratios(self) -> tuple[float | None, ...]:
        return tuple(_ratio(rerun, self.baseline) for rerun in self.reruns)

    @property
    def rerun_ratio(self) -> float | None:
        """The last re-run's ratio: the one that settled the verdict."""
        return self.rerun_ratios[-1] if self.reruns else None

    @property
    def suspect(self) -> bool:
        """A timing outside its threshold in every run so far, with re-runs still to come."""
        return (
            self.metric.rule is Rule.NOISE
            and len(self.reruns) < self.metric.reruns
            and self.status in (Status.REGRESSION, Status.IMPROVEMENT)
        )


def noise_threshold(metric: Metric, baseline: Sample, now: Sample) -> float:
    spread = math.hypot(baseline.relative_spread, now.relative_spread)
    return max(metric.threshold, NOISE_K * spread)


def _threshold(metric: Metric, baseline: Sample, now: Sample) -> float:
    if metric.rule is Rule.EXACT:
        return 0.0
    if metric.rule is Rule.TOLERANCE:
        return metric.threshold
    return noise_threshold(metric, baseline, now)


def judge(
    workload: str, metric: Metric, baseline: Sample | None, now: Sample | None, device_has_baseline: bool
) -> Verdict:
    if now is None:
        return Verdict(workload, metric, baseline, now, Status.NOT_MEASURED)
    if baseline is None:
        missing = (
            Status.NO_DEVICE_BASELINE if metric.per_device and not device_has_baseline else Status.NO_BASELINE
        )
        return Verdict(workload, metric, baseline, now, missing)
    if metric.rule is Rule.INFO:
        return Verdict(workload, metric, baseline, now, Status.INFO)
    threshold = _threshold(metric, baseline, now)
    if now.median > baseline.median * (1 + threshold):
        status = Status.REGRESSION
    elif now.median < baseline.median * (1 - threshold):
        status = Status.IMPROVEMENT
    else:
        status = Status.OK
    return Verdict(workload, metric, baseline, now, status, threshold)


def judge_all(
    measured: dict[str, Measurements], expected: dict[str, Measurements], device_has_baseline: bool
) -> list[Verdict]:
    """A verdict for every measured workload and metric, in workload then METRICS order."""
    verdicts = []
    for workload, metrics in measured.items():
        for name, metric in METRICS.items():
            if name in metrics:
                before = expected.get(workload, {}).get(name)
                verdicts.append(judge(workload, metric, before, metrics[name], device_has_baseline))
    return verdicts


def confirm(verdict: Verdict, rerun: Sample) -> Verdict:
    """A suspect's verdict after one more re-run: it stands if the re-run falls outside the same way,
    and is noise otherwise. It is settled when it is noise or has all its metric's re-runs."""
    again = judge(verdict.workload, verdict.metric, verdict.baseline, rerun, device_has_baseline=True)
    status = verdict.status if again.status is verdict.status else Status.NOISE
    return replace(verdict, status=status, reruns=(*verdict.reruns, rerun))


def failed(verdicts: list[Verdict], strict: bool) -> bool:
    failing = {Status.REGRESSION, Status.IMPROVEMENT} if strict else {Status.REGRESSION}
    return any(v.status in failing for v in verdicts)
