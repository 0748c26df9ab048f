"""What the gate measures, as data: each metric's unit, the rule that judges it, where its baseline lives.

Rules (see `perfgate.verdict`):
- exact: a count; any increase is a regression (kernel launches, bytes moved).
- interval: a measurement that varies from one run to the next (timings, callgrind instruction
  counts); a regression only when the whole confidence interval of head / base lies beyond the
  metric's threshold.
- info: recorded and shown, never judged (compile time, achieved bandwidth).

A per-device metric's baseline is kept per device name within an architecture's file (an H200 has
about 1.4× an H100's bandwidth); the others are the same on every device of the architecture.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Rule(Enum):
    EXACT = "exact"
    INTERVAL = "interval"
    INFO = "info"


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    rule: Rule
    per_device: bool
    description: str
    threshold: float = 0.0  # INTERVAL: the smallest relative change that counts


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "kernel_launches",
            "launches",
            Rule.EXACT,
            per_device=False,
            description="kernels launched per call (the fuser: its kernels plus the aten calls it left eager)",
        ),
        Metric(
            "bytes_moved",
            "B",
            Rule.EXACT,
            per_device=False,
            description="fewest bytes the call must move: inputs read once, outputs written once",
        ),
        Metric(
            "host_instructions",
            "instructions",
            Rule.INTERVAL,
            per_device=True,
            description="CPU instructions of one warm call on tiny inputs (callgrind)",
            # Runs of unchanged code differed by at most 0.33% (docs/perfgate.md): 1% is 3× that.
            threshold=0.01,
        ),
        Metric(
            "compile_instructions",
            "instructions",
            Rule.INTERVAL,
            per_device=True,
            description="CPU instructions inside the backend's own compile step during the first call "
            "(callgrind; Dynamo's and AOTAutograd's tracing are outside it)",
            # Runs of unchanged code (all eleven workloads) differed by at most 0.06%; 1%, as for the host
            # count, is more than ten times that (docs/perfgate.md, "Compile cost on the CPU tier").
            threshold=0.01,
        ),
        Metric(
            "kernel_time_ms",
            "ms",
            Rule.INTERVAL,
            per_device=True,
            description="device time of one call, L2 flushed before each rep (CUDA events)",
            # Half the 10% slowdown the gate must catch: an interval no wider than ±5% around a 10%
            # slowdown clears it.
            threshold=0.05,
        ),
        Metric(
            "host_time_us",
            "us",
            Rule.INFO,
            per_device=True,
            description="wall time of one warm call on tiny inputs (launch overhead as the user waits it)",
            # Shown, not judged: the host of a lent GPU changes speed between processes and within one
            # (per-process medians of unchanged code 44-110 us on an H100), so no interval settles.
        ),
        Metric(
            "host_relative",
            "x reference call",
            Rule.INTERVAL,
            per_device=True,
            description="host time of one warm call on tiny inputs over an eager tiny add's (and its "
            "gradient, for a training workload), timed in turn",
            # What the gate judges of launch overhead: the reference call slows with the host, so the
            # ratio keeps the compiled program's own cost. 15 us more on a 45-60 us call is 25-33%.
            # 15%, not 10%: a lent H100's host runs a process at 43-89 us a call where the next runs
            # the same at half that, the reference only partly following, and unchanged code's A/A
            # intervals reached 1.124 with 12 processes a side (records/perfgate-settle-h100-2026-11-27.md);
            # 10% never settled within the default budget, and the smallest change caught reliably was
            # already about 20% of a call.
            threshold=0.15,
        ),
        Metric(
            "compile_time_s",
            "s",
            Rule.INFO,
            per_device=True,
            description="first call after resetting Dynamo and the fuser's kernel cache",
        ),
        Metric(
            "bandwidth_fraction",
            "of copy peak",
            Rule.INFO,
            per_device=True,
            description="bytes_moved / kernel time, as a fraction of a large device copy's bandwidth",
        ),
    )
}

TIER_METRICS: dict[str, tuple[str, ...]] = {
    "gpu": (
        "kernel_launches",
        "bytes_moved",
        "kernel_time_ms",
        "host_time_us",
        "host_relative",
        "compile_time_s",
        "bandwidth_fraction",
    ),
    "cpu": ("kernel_launches", "bytes_moved", "host_instructions", "compile_instructions"),
}


def _rounded(value: float) -> float:
    """Whole numbers exact, others to six significant digits: a baseline's diff shows changes, not
    float noise."""
    return int(value) if float(value).is_integer() else float(f"{value:.6g}")


@dataclass(frozen=True)
class Sample:
    """A measurement: the median of its repetitions and their median absolute deviation (MAD)."""

    median: float
    mad: float = 0.0
    n: int = 1
    values: tuple[float, ...] = ()  # the repetitions themselves, when this run measured them

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        median = statistics.median(values)
        mad = statistics.median(abs(v - median) for v in values)
        return cls(median, mad, len(values), tuple(values))

    @classmethod
    def exact(cls, value: float) -> Sample:
        return cls(value, 0.0, 1, (value,))

    def to_json(self) -> float | dict[str, Any]:
        median, mad = _rounded(self.median), _rounded(self.mad)
        if self.n == 1 and self.mad == 0:
            return median
        return {"median": median, "mad": mad, "n": self.n}

    @classmethod
    def from_json(cls, data: float | dict[str, Any]) -> Sample:
        if isinstance(data, dict):
            return cls(data["median"], data["mad"], data["n"])
        return cls(data)


# A workload's measurements on one run: metric name -> sample (None where the metric is unavailable,
# such as kernel launches of a non-fuser backend on the CPU).
Measurements = dict[str, Sample | None]
