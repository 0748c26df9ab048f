"""Reports of a gate run: a plain table for the terminal, Markdown for a pull request, a PNG of the
ratios with their intervals (matplotlib), and for each tree a JSON file in pytest-benchmark's
`--benchmark-json` format (machine_info with the GPU, commit_info of that tree, one benchmark per
workload and metric), so tools that read pytest-benchmark files can read the gate's.
"""

from __future__ import annotations

import datetime
import math
import platform
import statistics
from pathlib import Path
from typing import Any

from perfgate.gate import GateResult
from perfgate.machine import commit, cpu_model
from perfgate.metrics import METRICS, Metric, Rule, Sample
from perfgate.verdict import CONFIDENCE, Status, Verdict, pooled

COLUMNS = ("workload", "metric", "against", "reference", "head", "ratio", "interval", "threshold", "verdict")
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
    if metric.unit in SECONDS_PER_UNIT:
        text = f"{_number(sample.median)} {metric.unit}"
        return f"{text} ±{_number(sample.mad)}" if sample.mad else text
    return f"{sample.median:,.0f}"


def rows(verdicts: list[Verdict]) -> list[tuple[str, ...]]:
    return [
        (
            v.workload,
            v.metric.name,
            v.against,
            format_value(v.metric, v.reference),
            format_value(v.metric, v.head),
            "—" if v.ratio is None else f"{v.ratio:.3f}×",
            "—" if v.interval is None else f"[{v.interval[0]:.3f}, {v.interval[1]:.3f}]",
            f"+{v.metric.threshold:.0%}"
            if v.interval is not None
            else "exact"
            if v.metric.rule is Rule.EXACT
            else "—",
            v.status.value,
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


def _named(verdicts: list[Verdict]) -> str:
    return ", ".join(
        f"{v.workload} {v.metric.name} {v.ratio:.3f}×"
        + (f" [{v.interval[0]:.3f}, {v.interval[1]:.3f}]" if v.interval else "")
        + f" against {v.against}"
        for v in verdicts
    )


def _verdict_word(result: GateResult) -> str:
    return {0: "PASS", 1: "FAIL", 3: "INCONCLUSIVE"}[result.exit_status]


def summary(result: GateResult) -> list[str]:
    """One line per thing a reader must act on, then how the run was made, then the verdict."""
    by_status: dict[Status, list[Verdict]] = {}
    for verdict in result.verdicts:
        by_status.setdefault(verdict.status, []).append(verdict)
    lines = []
    if regressions := by_status.get(Status.REGRESSION):
        lines.append(f"{len(regressions)} regression(s): {_named(regressions)}")
    if inconclusive := by_status.get(Status.INCONCLUSIVE):
        lines.append(
            f"{len(inconclusive)} inconclusive when the time budget ran out (exit 3): {_named(inconclusive)}; "
            "more rounds (--budget-s) or a quieter machine can settle them"
        )
    if improvements := by_status.get(Status.IMPROVEMENT):
        lines.append(
            f"{len(improvements)} improvement(s)"
            + (" (failing: --strict)" if result.request.strict else "")
            + f": {_named(improvements)}"
        )
        if any(v.against != "base" for v in improvements):
            lines.append(
                f"the committed file is out of date: `python -m perfgate update --tier {result.machine.tier}` "
                "and commit the diff"
            )
    if not result.device_has_baseline:
        lines.append(
            f"{result.baseline_path.name} has no section for {result.machine.device}: its per-device "
            f"history starts with `python -m perfgate update --tier {result.machine.tier}`"
        )
    for workload, achieved in sorted(result.planted.items()):
        slowdowns = ", ".join(f"{a:+.1%}" for a in achieved)
        lines.append(f"testing-only kernel slowdown planted in head's {workload}: {slowdowns} achieved")
    processes = ", ".join(f"{role} {count}" for role, count in result.processes.items())
    lines.append(
        f"measuring processes: {processes}; order seed {result.seed} (--seed {result.seed} repeats it); "
        f"{result.seconds:.0f} s"
    )
    lines.append(f"{_verdict_word(result)}: {_title(result)}")
    return lines


def _title(result: GateResult) -> str:
    machine = result.machine
    trees = " against ".join(f"{t.role} {t.commit[:10]}" for t in result.trees)
    return (
        f"{result.request.backend} on {machine.device} ({machine.architecture}), {machine.tier} tier, {trees}"
    )


def text(result: GateResult) -> str:
    return table(COLUMNS, rows(result.verdicts)) + "\n\n" + "\n".join(summary(result))


def markdown(result: GateResult) -> str:
    header = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)
    body = "\n".join("| " + " | ".join(row) + " |" for row in rows(result.verdicts))
    notes = "\n".join(f"- {line}" for line in summary(result))
    icon = {0: "✅", 1: "❌", 3: "⚠️"}[result.exit_status]
    return (
        f"### perfgate {icon} {_verdict_word(result)}: {_title(result)}\n\n{header}\n{body}\n\n"
        f"Intervals: {CONFIDENCE:.0%} confidence, bootstrap over each tree's processes.\n\n{notes}\n"
    )


COLOURS = {Status.REGRESSION: "tab:red", Status.IMPROVEMENT: "tab:green", Status.INCONCLUSIVE: "tab:orange"}


def plot(result: GateResult, path: Path) -> None:
    """Each judged ratio as a point with its interval, and each metric's threshold as a tick."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    shown = [
        v for v in result.verdicts if v.ratio is not None and v.status not in (Status.INFO, Status.HISTORY)
    ]
    figure, axis = plt.subplots(figsize=(8, 1.0 + 0.3 * len(shown)))
    for y, verdict in enumerate(shown):
        low, high = verdict.interval or (verdict.ratio, verdict.ratio)
        colour = COLOURS.get(verdict.status, "tab:blue")
        axis.errorbar(
            verdict.ratio,
            y,
            xerr=[[verdict.ratio - low], [high - verdict.ratio]],
            fmt="o",
            color=colour,
            capsize=3,
        )
        if verdict.interval is not None:
            axis.plot([1 + verdict.metric.threshold] * 2, [y - 0.35, y + 0.35], color="grey", linewidth=1)
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_yticks(range(len(shown)), [f"{v.workload} {v.metric.name} ({v.against})" for v in shown])
    axis.invert_yaxis()
    axis.set_xlabel(f"head / reference, {CONFIDENCE:.0%} interval (grey: threshold)")
    axis.set_title(f"perfgate {_verdict_word(result)}: {_title(result)}", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _stats(values: list[float], scale: float) -> dict[str, Any]:
    """pytest-benchmark's stats fields, for one metric's samples."""
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


def _benchmark(result: GateResult, role: str, workload: str, metric: Metric) -> dict[str, Any] | None:
    samples = result.samples[role][workload][metric.name]
    if None in samples:
        return None
    scale = SECONDS_PER_UNIT.get(metric.unit, 1.0)
    name = f"{workload}[{metric.name}]"
    verdict = next((v for v in result.verdicts if v.workload == workload and v.metric is metric), None)
    return {
        "group": metric.name,
        "name": name,
        "fullname": f"perfgate/{result.request.backend}/{name}",
        "params": None,
        "param": None,
        "extra_info": {
            "unit": "s" if metric.unit in SECONDS_PER_UNIT else metric.unit,
            "tree": role,
            "processes": len(samples),
            "against": None if verdict is None else verdict.against,
            "ratio": None if verdict is None else verdict.ratio,
            "interval": None if verdict is None or verdict.interval is None else list(verdict.interval),
            "verdict": None if verdict is None else verdict.status.value,
        },
        "options": {"tier": result.machine.tier, "backend": result.request.backend},
        "stats": _stats(list(pooled(samples).values), scale),
    }


def benchmark_json(result: GateResult, role: str) -> dict[str, Any]:
    """The `role` tree's measurements (its processes' medians, or its one process's repetitions)."""
    machine = result.machine
    tree = next(t for t in result.trees if t.role == role)
    benchmarks = [
        _benchmark(result, role, workload, metric)
        for workload, metrics in result.samples[role].items()
        for metric in METRICS.values()
        if metric.name in metrics
    ]
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
        "commit_info": commit("HEAD" if role == "head" else tree.commit),
        "benchmarks": [b for b in benchmarks if b is not None],
        "datetime": datetime.datetime.now(datetime.UTC).isoformat(),
        "version": PYTEST_BENCHMARK_FORMAT,
        "perfgate": {
            "tree": role,
            "failed": result.failed,
            "exit_status": result.exit_status,
            "seed": result.seed,
            "strict": result.request.strict,
            "baseline": str(result.baseline_path),
        },
    }
