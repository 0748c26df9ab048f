"""The two tiers a gate runs on: `gpu` (timings and counts) and `cpu` (the deterministic metrics only).

A tier measures workloads for one backend in this process; a workload that fails raises
`WorkloadFailed`, naming it. The GPU tier applies the testing-only slowdowns of `perfgate.planted`
where the environment asks for them, and records what they achieved in `planted`.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from perfgate import planted
from perfgate.backends import Backend
from perfgate.machine import Machine, this_machine
from perfgate.measure import (
    Prepared,
    copy_peak_bytes_per_s,
    count_on_cpu,
    instructions_on_cpu,
    kernel_time_ms,
    l2_flush_buffer,
    prepare_on_gpu,
    time_on_gpu,
)
from perfgate.metrics import Measurements
from perfgate.workloads import Workload


class WorkloadFailed(Exception):
    def __init__(self, workload: str, error: Exception):
        super().__init__(f"{workload}: {type(error).__name__}: {error}")
        self.workload = workload


class GpuTier:
    """Timings and counts on a CUDA device; one L2 flush buffer and one copy-peak measurement per tier."""

    def __init__(self, backend: Backend, device: str = "cuda"):
        self.machine: Machine = this_machine("gpu")
        self.backend = backend
        self.device = device
        self.flush = l2_flush_buffer(device)
        self.copy_peak = copy_peak_bytes_per_s(device)
        self.planted: dict[str, float] = {}  # workload -> kernel slowdown achieved by perfgate.planted

    def measure(self, workloads: Iterable[Workload]) -> dict[str, Measurements]:
        results = {}
        for workload in workloads:
            try:
                prepared = prepare_on_gpu(workload, self.backend, self.device)
                self._plant(workload.name, prepared)
                results[workload.name] = time_on_gpu(prepared, self.flush, self.copy_peak)
            except Exception as error:
                raise WorkloadFailed(workload.name, error) from error
        return results

    def _plant(self, name: str, prepared: Prepared) -> None:
        kinds = planted.requested(name)
        if "host" in kinds:
            prepared.tiny_step.compiled = planted.WithHostDelay(
                prepared.tiny_step.compiled, kinds["host"] * 1e-6
            )
        if "kernel" in kinds:
            self.planted[name] = planted.slow_kernel(
                prepared.step,
                lambda step: kernel_time_ms(step, self.flush).median,
                self.copy_peak,
                self.device,
                kinds["kernel"],
            )


class CpuTier:
    """Kernel launches and bytes here; instruction counts under callgrind, unless `instructions=False`
    (seconds instead of minutes: a quick check of the counts alone). Callgrind runs in `processes`
    valgrind processes (one per core by default); each pays about 20 s to import torch under valgrind,
    so where cores are shared, fewer is cheaper."""

    def __init__(self, backend: Backend, instructions: bool = True, processes: int | None = None):
        self.machine: Machine = this_machine("cpu")
        self.backend = backend
        self.instructions = instructions
        self.processes = processes
        self.planted: dict[str, float] = {}  # the testing-only slowdowns are GPU timings: none here

    def measure(self, workloads: Iterable[Workload]) -> dict[str, Measurements]:
        workloads = list(workloads)
        results = {}
        for workload in workloads:
            try:
                results[workload.name] = count_on_cpu(workload, self.backend)
            except Exception as error:
                raise WorkloadFailed(workload.name, error) from error
        if self.instructions:
            for name, counts in instructions_on_cpu(workloads, self.backend, self.processes).items():
                results[name].update(counts)
        return results


Tier = GpuTier | CpuTier


def make_tier(name: str, backend: Backend, instructions: bool = True) -> Tier:
    # Each gate run starts from a Dynamo that has compiled nothing, so every first call is cold.
    torch._dynamo.reset()
    return GpuTier(backend) if name == "gpu" else CpuTier(backend, instructions)
