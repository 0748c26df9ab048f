"""Reports of a gate run: a plain table for the terminal, Markdown for a pull request, and JSON in
pytest-benchmark's `--benchmark-json` format (machine_info with the GPU, commit_info, benchmarks with
stats), so tools that read pytest-benchmark files can read the gate's.
"""

from __future__ import annotations

import datetime
import math
import platform
import statistics
from typing import Any

from perfgate.gate import GateResult
from perfgate.machine import commit, cpu_model
from perfgate.metrics import Metric, Rule, Sample
from perfgate.verdict import Status, Verdict

COLUMNS = ("workload", "metric", "baseline", "now", "ratio", "threshold", "verdict")
# pytest-benchmark's stats are seconds: timings are converted, counts are left in their own unit.
SECONDS_PER_UNIT = {"ms": 1e-3, "us": 1e-6, "s": 1.0}
# The pytest-benchmark release whose JSON layout the report follows.
PYTEST_BENCHMARK_FORMAT = "5.1.0"


def _number(value: float) -> str:
    """Up to four significant digits, never in exponent form: 3,768 and 0.09625 and 0.2."""
    if value == 0:
        return "0"
    decimals = max(0, 3 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if decimals else text


def format_value(metric: Metric, sample: Sample | None) -> str:
    if sample is None:
        return "—"
    if metric.unit == "of copy peak":
        return f"{sample.median:.1%}"
    if metric.rule in (Rule.EXACT, Rule.TOLERANCE):
        return f"{sample.median:,.0f}"
    text = f"{_number(sample.median)} {metric.unit}"
    return f"{text} ±{_number(sample.mad)}" if sample.mad else text


def _verdict_text(verdict: Verdict) -> str:
    text = verdict.status.value
    ratios = [f"{ratio:.3f}×" for ratio in verdict.rerun_ratios if ratio is not None]
    if ratios:
        text += f" (re-run{'s' if len(ratios) > 1 else ''} {', '.join(ratios)})"
    return text


def rows(verdicts: list[Verdict]) -> list[tuple[str, ...]]:
    return [
        (
            v.workload,
            v.metric.name,
            format_value(v.metric, v.baseline),
            format_value(v.metric, v.now),
            "—" if v.ratio is None else f"{v.ratio:.3f}×",
            "—" if v.threshold is None else f"±{v.threshold:.1%}",
            _verdict_text(v),
        )
        for v in verdicts
    ]


def table(header: tuple[str, ...], body: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in (header, *body)
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def summary(result: GateResult) -> list[str]:
    """One line per thing a reader must act on: regressions, improvements, missing baselines."""
    lines = []
    by_status: dict[Status, list[Verdict]] = {}
    for verdict in result.verdicts:
        by_status.setdefault(verdict.status, []).append(verdict)
    regressions = by_status.get(Status.REGRESSION, [])
    if regressions:
        names = ", ".join(f"{v.workload} {v.metric.name} {v.ratio:.3f}×" for v in regressions)
        lines.append(f"{len(regressions)} regression(s): {names}")
    improvements = by_status.get(Status.IMPROVEMENT, [])
    if improvements:
        workloads = " ".join(f"--workload {w}" for w in sorted({v.workload for v in improvements}))
        lines.append(
            f"{len(improvements)} improvement(s) beyond threshold"
            + (" (failing: --strict)" if result.strict else "")
            + f"; rebaseline with `python -m perfgate update --tier {result.machine.tier} {workloads}` "
            "and commit the diff"
        )
    if not result.device_has_baseline:
        lines.append(
            f"no baseline for this device ({result.machine.device}) in {result.baseline_path.name}: "
            f"per-device metrics were not compared; record them with `python -m perfgate update "
            f"--tier {result.machine.tier}`"
        )
    elif by_status.get(Status.NO_BASELINE):
        missing = sorted({v.workload for v in by_status[Status.NO_BASELINE]})
        lines.append(f"no baseline for {', '.join(missing)}: not compared")
    lines.append(("FAIL" if result.failed else "PASS") + f": {_title(result)}")
    return lines


def _title(result: GateResult) -> str:
    machine = result.machine
    return f"{result.backend} on {machine.device} ({machine.architecture}), {machine.tier} tier"


def text(result: GateResult) -> str:
    return table(COLUMNS, rows(result.verdicts)) + "\n\n" + "\n".join(summary(result))


def markdown(result: GateResult) -> str:
    header = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)
    body = "\n".join("| " + " | ".join(row) + " |" for row in rows(result.verdicts))
    notes = "\n".join(f"- {line}" for line in summary(result))
    verdict = "❌ FAIL" if result.failed else "✅ PASS"
    return f"### perfgate {verdict}: {_title(result)}\n\n{header}\n{body}\n\n{notes}\n"


def _stats(values: list[float], scale: float) -> dict[str, Any]:
    """pytest-benchmark's stats fields, for one metric's repetitions."""
    data = sorted(v * scale for v in values)
    mean = statistics.fmean(data)
    stddev = statistics.stdev(data) if len(data) > 1 else 0.0
    q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive") if len(data) > 1 else (data[0],) * 3
    iqr = q3 - q1
    inside = [v for v in data if q1 - 1.5 * iqr <= v <= q3 + 1.5 * iqr]
    iqr_outliers = len(data) - len(inside)
    stddev_outliers = sum(1 for v in data if not mean - stddev <= v <= mean + stddev)
    return {
        "min": data[0],
        "max": data[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": len(data),
        "median": statistics.median(data),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": inside[0],
        "hd15iqr": inside[-1],
        "ops": 1 / mean if mean else 0.0,
        "total": sum(data),
        "iterations": 1,
        "data": data,
    }


def _benchmark(result: GateResult, verdict: Verdict) -> dict[str, Any]:
    metric, now = verdict.metric, verdict.now
    scale = SECONDS_PER_UNIT.get(metric.unit, 1.0)
    name = f"{verdict.workload}[{metric.name}]"
    return {
        "group": metric.name,
        "name": name,
        "fullname": f"perfgate/{result.backend}/{name}",
        "params": None,
        "param": None,
        "extra_info": {
            "unit": "s" if metric.unit in SECONDS_PER_UNIT else metric.unit,
            "baseline": None if verdict.baseline is None else verdict.baseline.median * scale,
            "ratio": verdict.ratio,
            "threshold": verdict.threshold,
            "verdict": verdict.status.value,
            "rerun_ratio": verdict.rerun_ratio,
            "rerun_ratios": list(verdict.rerun_ratios),
        },
        "options": {"tier": result.machine.tier, "backend": result.backend},
        "stats": _stats(list(now.values or (now.median,)), scale),
    }


def benchmark_json(result: GateResult) -> dict[str, Any]:
    machine = result.machine
    return {
        "machine_info": {
            "node": platform.node(),
            "processor": platform.processor(),
            "machine": platform.machine(),
            "python_compiler": platform.python_compiler(),
            "python_implementation": platform.python_implementation(),
            "python_implementation_version": platform.python_version(),
            "python_version": platform.python_version(),
            "python_build": list(platform.python_build()),
            "release": platform.release(),
            "system": platform.system(),
            "cpu": {"brand_raw": cpu_model()},
            "gpu": machine.device if machine.tier == "gpu" else None,
            "architecture": machine.architecture,
            **{
                key: value
                for key, value in machine.recorded().items()
                if key in ("driver", "torch", "triton")
            },
        },
        "commit_info": commit(),
        "benchmarks": [_benchmark(result, v) for v in result.verdicts if v.now is not None],
        "datetime": datetime.datetime.now(datetime.UTC).isoformat(),
        "version": PYTEST_BENCHMARK_FORMAT,
        "perfgate": {"failed": result.failed, "strict": result.strict, "baseline": str(result.baseline_path)},
    }
