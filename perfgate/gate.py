"""The gate and the update: measure this machine's tier, then judge against, or rewrite, the baseline.

A gate run measures every workload, judges each metric (`perfgate.verdict`), then measures the
workloads with a suspect timing again and judges those timings again, as many times as the metric asks
(kernel time once, host time twice): a timing fails only when every run says so. `update` measures and
rewrites this architecture's baseline file, this device's section only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfgate import baselines
from perfgate.machine import Machine
from perfgate.metrics import Measurements
from perfgate.tiers import Tier
from perfgate.verdict import Verdict, confirm, failed, judge_all
from perfgate.workloads import Workload


@dataclass
class GateResult:
    machine: Machine
    backend: str
    baseline_path: Path
    device_has_baseline: bool
    verdicts: list[Verdict]
    strict: bool

    @property
    def failed(self) -> bool:
        return failed(self.verdicts, self.strict)


def judge_with_confirmation(
    tier: Tier, measured: dict[str, Measurements], expected: dict[str, Measurements], device_known: bool
) -> list[Verdict]:
    """Verdicts for `measured`, with every suspect timing confirmed or dismissed by its re-runs.

    Each round re-measures the workloads that still have a suspect; a suspect leaves the rounds as noise
    at its first re-run inside the threshold, or confirmed after its metric's last re-run."""
    verdicts = judge_all(measured, expected, device_known)
    while suspects := sorted({v.workload for v in verdicts if v.suspect}):
        reruns = tier.remeasure(suspects)
        verdicts = [confirm(v, reruns[v.workload][v.metric.name]) if v.suspect else v for v in verdicts]
    return verdicts


def run_gate(
    tier: Tier, workloads: list[Workload], baseline_dir: Path = baselines.BASELINE_DIR, strict: bool = False
) -> GateResult:
    machine = tier.machine
    path = baselines.baseline_path(machine.architecture, baseline_dir)
    expected, device_known = baselines.expected(baselines.load(path), tier.backend.name, machine.device)
    measured = tier.measure(workloads)
    verdicts = judge_with_confirmation(tier, measured, expected, device_known)
    return GateResult(machine, tier.backend.name, path, device_known, verdicts, strict)


def run_update(tier: Tier, workloads: list[Workload], baseline_dir: Path = baselines.BASELINE_DIR) -> Path:
    machine = tier.machine
    path = baselines.baseline_path(machine.architecture, baseline_dir)
    measured = tier.measure(workloads)
    baselines.write(path, baselines.updated(baselines.load(path), machine, tier.backend.name, measured))
    return path
