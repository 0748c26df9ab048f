"""Backends side by side: every workload on the fuser, Inductor and eager, as ratios to a reference.

Prints one table per metric and writes a PNG of grouped bars (matplotlib), one panel per metric.
On a GPU the metrics are kernel time, host time and kernel launches, as ratios to Inductor. On the
CPU tier they are instruction counts, as ratios to eager: Inductor's CPU kernels cannot run under
callgrind, so it has no counts there.
"""

from __future__ import annotations

import math
from pathlib import Path

from perfgate.backends import BACKENDS
from perfgate.metrics import METRICS, Measurements
from perfgate.report import format_value, table
from perfgate.tiers import make_tier
from perfgate.workloads import Workload

COMPARED = {
    "gpu": ("kernel_time_ms", "host_time_us", "kernel_launches"),
    "cpu": ("host_instructions",),
}
REFERENCE = {"gpu": "inductor", "cpu": "eager"}
Results = dict[str, dict[str, Measurements]]  # backend -> workload -> measurements


def measure_backends(tier: str, workloads: list[Workload], backends: list[str]) -> Results:
    return {name: make_tier(tier, BACKENDS[name]).measure(workloads) for name in backends}


def ratio(results: Results, reference: str, backend: str, workload: str, metric: str) -> float | None:
    sample = results[backend][workload].get(metric)
    base = results.get(reference, {}).get(workload, {}).get(metric)
    if sample is None or base is None or not base.median:
        return None
    return sample.median / base.median


def tables(results: Results, reference: str, metrics: tuple[str, ...]) -> str:
    backends = list(results)
    others = [b for b in backends if b != reference]
    workloads = list(next(iter(results.values())))
    blocks = []
    for name in metrics:
        metric = METRICS[name]
        header = ("workload", *backends, *(f"{b}/{reference}" for b in others))
        body = []
        for workload in workloads:
            values = [format_value(metric, results[b][workload].get(name)) for b in backends]
            ratios = [ratio(results, reference, b, workload, name) for b in others]
            body.append((workload, *values, *("—" if r is None else f"{r:.2f}×" for r in ratios)))
        blocks.append(f"{name} ({metric.unit}; ratio to {reference}, lower is better)\n{table(header, body)}")
    return "\n\n".join(blocks)


def plot(results: Results, reference: str, metrics: tuple[str, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    backends = list(results)
    workloads = list(next(iter(results.values())))
    figure, axes = plt.subplots(
        len(metrics), 1, figsize=(max(8, 1.2 * len(workloads)), 3.5 * len(metrics)), squeeze=False
    )
    width = 0.8 / len(backends)
    for axis, name in zip(axes[:, 0], metrics, strict=True):
        for i, backend in enumerate(backends):
            ratios = [ratio(results, reference, backend, w, name) for w in workloads]
            heights = [math.nan if r is None else r for r in ratios]  # no bar where nothing was measured
            axis.bar([x + i * width for x in range(len(workloads))], heights, width, label=backend)
        axis.set_yscale("log")  # ratios span orders of magnitude (the interpreter on the CPU tier)
        axis.axhline(1.0, color="black", linewidth=0.8)
        middle = width * (len(backends) - 1) / 2
        axis.set_xticks([x + middle for x in range(len(workloads))], workloads, rotation=20)
        axis.set_ylabel(f"{name}\n÷ {reference}")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def run_compare(tier: str, workloads: list[Workload], backends: list[str], plot_path: Path) -> str:
    results = measure_backends(tier, workloads, backends)
    plot(results, REFERENCE[tier], COMPARED[tier], plot_path)
    return tables(results, REFERENCE[tier], COMPARED[tier])
