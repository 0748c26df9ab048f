"""Verdicts: head's measurements against a reference — the base tree's, or the committed baseline file's.

- exact (kernel launches, bytes moved): any increase is a regression, any decrease an improvement.
- interval (timings, instruction counts): the ratio head / reference with a 95% confidence interval
  (scipy.stats.bootstrap, percentile method, over the samples of each side). A regression only when
  the whole interval lies above 1 + threshold; an improvement only when it lies below 1 - threshold;
  ok when it lies below 1 + threshold; inconclusive when it straddles 1 + threshold (the gate then
  measures more rounds, and reports what is still inconclusive when its time budget runs out).
- info (compile time, bandwidth): the ratio is shown, never judged.

A side's samples are the medians of its processes (processes, not repetitions inside one, are what
vary together: clocks, placement, the host's load), or one process's repetitions where it had only one.
A committed file holds one number per metric: its interval comes from head's samples alone.

Regressions fail the gate. Improvements pass, and fail only under `strict`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
from scipy import stats

from perfgate.metrics import Metric, Rule, Sample

CONFIDENCE = 0.95
RESAMPLES = 4999


class Status(Enum):
    OK = "ok"
    REGRESSION = "REGRESSION"
    IMPROVEMENT = "improvement"
    INCONCLUSIVE = "inconclusive"
    HISTORY = "history (not judged)"
    NO_BASELINE = "no baseline"
    NO_DEVICE_BASELINE = "no baseline for this device"
    NOT_MEASURED = "not measured"
    INFO = "info"


@dataclass(frozen=True)
class Verdict:
    workload: str
    metric: Metric
    reference: Sample | None  # the base tree's samples, or the committed file's number
    head: Sample | None
    status: Status
    against: str = "base"  # "base", or the committed file's name
    interval: tuple[float, float] | None = None  # the ratio's confidence interval, for interval metrics

    @property
    def ratio(self) -> float | None:
        if self.head is None or self.reference is None:
            return None
        if self.reference.median == 0:
            return 1.0 if self.head.median == 0 else math.inf
        return self.head.median / self.reference.median


def pooled(samples: Sequence[Sample]) -> Sample:
    """One side's samples: each process's median, or the repetitions of its only process."""
    return samples[0] if len(samples) == 1 else Sample.of([s.median for s in samples])


def ratio_interval(head: Sample, reference: Sample, seed: int) -> tuple[float, float]:
    """The confidence interval of median(head) / median(reference), bootstrapped over the samples of
    each side that varies; a side of one number (a committed file's) or of equal numbers is held fixed,
    so two fixed sides give a point."""
    sides = [np.asarray(s.values or (s.median,), dtype=float) for s in (head, reference)]
    varying = [len(values) > 1 and np.ptp(values) > 0 for values in sides]
    if not any(varying):
        point = float(np.median(sides[0]) / np.median(sides[1]))
        return point, point

    def ratio(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        given = iter(resampled)
        head_m, reference_m = (
            np.median(next(given), axis=axis) if varies else np.median(values)
            for values, varies in zip(sides, varying, strict=True)
        )
        return head_m / reference_m

    result = stats.bootstrap(
        [values for values, varies in zip(sides, varying, strict=True) if varies],
        ratio,
        n_resamples=RESAMPLES,
        confidence_level=CONFIDENCE,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _interval_status(interval: tuple[float, float], threshold: float) -> Status:
    low, high = interval
    if low > 1 + threshold:
        return Status.REGRESSION
    if high < 1 - threshold:
        return Status.IMPROVEMENT
    if high <= 1 + threshold:
        return Status.OK
    return Status.INCONCLUSIVE


def judge(
    workload: str, metric: Metric, reference: Sample | None, head: Sample | None, against: str, seed: int = 0
) -> Verdict:
    """The verdict on one metric of one workload; `reference` None means there is nothing to judge by."""
    if head is None:
        return Verdict(workload, metric, reference, head, Status.NOT_MEASURED, against)
    if reference is None:
        return Verdict(workload, metric, reference, head, Status.NO_BASELINE, against)
    if metric.rule is Rule.INFO:
        return Verdict(workload, metric, reference, head, Status.INFO, against)
    if metric.rule is Rule.EXACT:
        status = (
            Status.REGRESSION
            if head.median > reference.median
            else Status.IMPROVEMENT
            if head.median < reference.median
            else Status.OK
        )
        return Verdict(workload, metric, reference, head, status, against)
    interval = ratio_interval(head, reference, seed)
    return Verdict(
        workload, metric, reference, head, _interval_status(interval, metric.threshold), against, interval
    )


def failed(verdicts: list[Verdict], strict: bool) -> bool:
    failing = {Status.REGRESSION, Status.IMPROVEMENT} if strict else {Status.REGRESSION}
    return any(v.status in failing for v in verdicts)
