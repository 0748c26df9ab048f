"""Does the GPU gate cry wolf, and does it catch a real 10% slowdown? One process, about 3 minutes.

    python -m perfgate.gpu_validation --out DIR            # on an H100 or H200
    python -m perfgate.gpu_validation --out DIR --quick    # smoke test: two workloads, few runs

1. Measures every workload with the fuser and writes the baseline to DIR/<architecture>.json (never
   to the repository's baselines).
2. Runs the gate --runs times against it on unchanged code (re-timing each workload, confirming
   suspects by re-runs, as `gate` does) and counts false alarms. Each run records its suspects with
   their ratios, so a false alarm shows whether a spike outlasted the re-runs.
3. Injects a slowdown into one workload: after the compiled call, a device-to-device copy sized so the
   call's device time grows by about 10%. The copy is calibrated against the measured kernel time and
   the slowdown actually achieved is measured and reported. Then runs the gate --catch-runs times
   on that workload and counts how often it fails on kernel time.
4. Prints a short table and writes DIR/gpu_validation.json.

It also checks the profiler's kernel count (what the gate uses for Inductor and eager) against the
fuser's own counters on the same calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from perfgate import baselines
from perfgate.backends import BACKENDS, Backend, compile_with_fuser
from perfgate.gate import judge_with_confirmation
from perfgate.measure import kernel_time_ms, launches_per_call
from perfgate.metrics import Measurements
from perfgate.report import table
from perfgate.tiers import GpuTier, make_tier
from perfgate.verdict import Status, Verdict, failed
from perfgate.workloads import WORKLOADS

TARGET_SLOWDOWN = 0.10


class WithExtraCopy:
    """A compiled program followed by a copy of `moved` bytes (half read, half written) on the device."""

    def __init__(self, compiled: Callable, moved: int, device: str):
        self.compiled = compiled
        self.device = device
        self.resize(moved)

    def resize(self, moved: int) -> None:
        self.moved = max(2, moved // 2 * 2)
        self.source = torch.empty(self.moved // 2, dtype=torch.uint8, device=self.device)
        self.target = torch.empty_like(self.source)

    def __call__(self, *args: Any) -> Any:
        result = self.compiled(*args)
        self.target.copy_(self.source)
        return result


def gate_once(tier: GpuTier, names: list[str], expected: dict[str, Measurements]) -> list[Verdict]:
    """One gate run on already compiled workloads: time them, judge, confirm suspects by a re-run."""
    return judge_with_confirmation(tier, tier.remeasure(names), expected, device_known=True)


def interleaved_ratio(base: Callable, slowed: Callable, flush: torch.Tensor, rounds: int = 5) -> list[float]:
    """Kernel-time ratios slowed / base, measured in alternation so drifts hit both alike."""
    return [kernel_time_ms(slowed, flush).median / kernel_time_ms(base, flush).median for _ in range(rounds)]


def inject(tier: GpuTier, name: str) -> tuple[GpuTier, list[float]]:
    """A tier whose `name` workload carries a calibrated extra copy; and the slowdowns measured."""
    base_ms = kernel_time_ms(tier.prepared[name].step, tier.flush).median
    copies: list[WithExtraCopy] = []

    def compile_with_extra_copy(program: Callable) -> Callable:
        copies.append(
            WithExtraCopy(
                compile_with_fuser(program),
                int(TARGET_SLOWDOWN * base_ms * 1e-3 * tier.copy_peak),
                tier.device,
            )
        )
        return copies[-1]

    slowed = GpuTier(Backend("fuser", compile_with_extra_copy, counted_by_fuser=True), tier.device)
    slowed.measure([WORKLOADS[name]])
    (copy,) = copies
    base_step, slowed_step = tier.prepared[name].step, slowed.prepared[name].step
    ratios = interleaved_ratio(base_step, slowed_step, tier.flush)
    # Small copies run below the copy peak: scale once by what the first try achieved.
    copy.resize(int(copy.moved * TARGET_SLOWDOWN / max(statistics.median(ratios) - 1, 0.01)))
    return slowed, interleaved_ratio(base_step, slowed_step, tier.flush)


def profiler_check(tier: GpuTier) -> list[tuple[str, int, int]]:
    """(workload, fuser counters, profiler CUDA kernels) for each prepared workload. They agree where
    every extern aten call launches exactly one kernel."""
    profiled = replace(tier.backend, counted_by_fuser=False)
    return [
        (
            name,
            int(launches_per_call(prepared.step, tier.backend, tier.device).median),
            int(launches_per_call(prepared.step, profiled, tier.device).median),
        )
        for name, prepared in tier.prepared.items()
    ]


def unchanged_runs(
    tier: GpuTier, names: list[str], expected: dict[str, Measurements], runs: int, deadline: float
) -> list[dict[str, Any]]:
    """`runs` gate runs on unchanged code (fewer if the clock passes `deadline`)."""
    results = []
    for _ in range(runs):
        if time.perf_counter() > deadline:
            break
        verdicts = gate_once(tier, names, expected)
        results.append(
            {
                "failed": failed(verdicts, strict=False),
                "suspects": {
                    f"{v.workload}.{v.metric.name}": {
                        "ratio": v.ratio,
                        "rerun_ratios": list(v.rerun_ratios),
                        "verdict": v.status.value,
                    }
                    for v in verdicts
                    if v.reruns
                },
                "regressions": [
                    f"{v.workload}.{v.metric.name} {v.ratio:.3f}"
                    for v in verdicts
                    if v.status is Status.REGRESSION
                ],
                "kernel_time_ratios": {
                    v.workload: v.ratio for v in verdicts if v.metric.name == "kernel_time_ms"
                },
            }
        )
    return results


def catch_runs(
    slowed: GpuTier, name: str, expected: dict[str, Measurements], runs: int
) -> list[dict[str, Any]]:
    results = []
    for _ in range(runs):
        (kernel,) = [v for v in gate_once(slowed, [name], expected) if v.metric.name == "kernel_time_ms"]
        results.append(
            {
                "caught": kernel.status is Status.REGRESSION,
                "ratio": kernel.ratio,
                "rerun_ratios": list(kernel.rerun_ratios),
            }
        )
    return results


def summary(results: dict[str, Any]) -> str:
    unchanged, injected = results["unchanged"], results["injected"]
    disagreements = [f"{w}: {c} vs {p}" for w, c, p in results["profiler_vs_fuser_counters"] if c != p]
    return table(
        ("check", "result"),
        [
            (
                "device",
                f"{results['device']} ({results['architecture']}), copy peak {results['copy_peak_tb_s']:.2f} TB/s",
            ),
            ("false alarms, unchanged code", f"{unchanged['false_alarms']} of {unchanged['runs']} gate runs"),
            (
                "suspects dismissed or confirmed by re-runs",
                str(sum(len(r["suspects"]) for r in unchanged["per_run"])),
            ),
            (
                f"injected slowdown ({injected['workload']})",
                f"{injected['measured_slowdown_median']:+.1%} measured (target {injected['target_slowdown']:+.0%})",
            ),
            ("caught", f"{injected['caught']} of {injected['runs']} gate runs"),
            ("fuser counters vs profiler kernels", "; ".join(disagreements) or "agree on every workload"),
            ("wall time", f"{results['seconds']:.0f} s"),
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the baseline and the results")
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: two workloads, 3 gate runs, 5 catches"
    )
    parser.add_argument("--runs", type=int, default=20, help="gate runs on unchanged code")
    parser.add_argument("--catch-runs", type=int, default=20, help="gate runs with the slowdown injected")
    parser.add_argument("--inject", default="pointwise_chain", choices=sorted(WORKLOADS))
    parser.add_argument("--budget-s", type=float, default=300, help="start no unchanged run after this")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    names = ["pointwise_chain", "softmax"] if args.quick else list(WORKLOADS)
    names += [] if args.inject in names else [args.inject]
    runs, catches = (3, 5) if args.quick else (args.runs, args.catch_runs)
    args.out.mkdir(parents=True, exist_ok=True)

    tier = make_tier("gpu", BACKENDS["fuser"])
    machine = tier.machine
    path = baselines.baseline_path(machine.architecture, args.out)
    baselines.write(
        path, baselines.updated(None, machine, "fuser", tier.measure(WORKLOADS[n] for n in names))
    )
    expected, _ = baselines.expected(baselines.load(path), "fuser", machine.device)
    print(f"baseline written to {path} after {time.perf_counter() - started:.0f} s", flush=True)
    unchanged = unchanged_runs(tier, names, expected, runs, started + args.budget_s)
    print(f"{len(unchanged)} unchanged runs done after {time.perf_counter() - started:.0f} s", flush=True)
    slowed, slowdowns = inject(tier, args.inject)
    caught = catch_runs(slowed, args.inject, expected, catches)
    results = {
        "device": machine.device,
        "architecture": machine.architecture,
        "recorded": machine.recorded(),
        "copy_peak_tb_s": tier.copy_peak / 1e12,
        "workloads": names,
        "baseline": str(path),
        "unchanged": {
            "runs": len(unchanged),
            "false_alarms": sum(r["failed"] for r in unchanged),
            "per_run": unchanged,
        },
        "injected": {
            "workload": args.inject,
            "target_slowdown": TARGET_SLOWDOWN,
            "measured_slowdown_median": statistics.median(slowdowns) - 1,
            "measured_slowdowns": [r - 1 for r in slowdowns],
            "runs": len(caught),
            "caught": sum(c["caught"] for c in caught),
            "per_run": caught,
        },
        "profiler_vs_fuser_counters": profiler_check(tier),
        "seconds": time.perf_counter() - started,
    }
    (args.out / "gpu_validation.json").write_text(json.dumps(results, indent=2) + "\n")
    print(summary(results) + f"\n\nresults: {args.out / 'gpu_validation.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
