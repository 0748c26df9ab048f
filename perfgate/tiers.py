"""The two tiers a gate runs on: `gpu` (timings and counts) and `cpu` (the deterministic metrics only).

A tier measures workloads for one backend, and measures the suspects of a first pass again for the
confirmation re-run. The GPU tier keeps each workload compiled and its inputs allocated, so a re-run
times the same compiled program rather than compiling again.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from perfgate.backends import Backend
from perfgate.machine import Machine, this_machine
from perfgate.measure import (
    Prepared,
    copy_peak_bytes_per_s,
    count_on_cpu,
    instructions_on_cpu,
    l2_flush_buffer,
    prepare_on_gpu,
    time_on_gpu,
)
from perfgate.metrics import Measurements
from perfgate.workloads import Workload


class GpuTier:
    """Timings and counts on a CUDA device; one L2 flush buffer and one copy-peak measurement per tier."""

    def __init__(self, backend: Backend, device: str = "cuda"):
        self.machine: Machine = this_machine("gpu")
        self.backend = backend
        self.device = device
        self.flush = l2_flush_buffer(device)
        self.copy_peak = copy_peak_bytes_per_s(device)
        self.prepared: dict[str, Prepared] = {}

    def measure(self, workloads: Iterable[Workload]) -> dict[str, Measurements]:
        results = {}
        for workload in workloads:
            self.prepared[workload.name] = prepare_on_gpu(workload, self.backend, self.device)
            results[workload.name] = time_on_gpu(self.prepared[workload.name], self.flush, self.copy_peak)
        return results

    def remeasure(self, names: Iterable[str]) -> dict[str, Measurements]:
        return {name: time_on_gpu(self.prepared[name], self.flush, self.copy_peak) for name in names}


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
        self.measured: dict[str, Workload] = {}

    def measure(self, workloads: Iterable[Workload]) -> dict[str, Measurements]:
        workloads = list(workloads)
        self.measured.update({w.name: w for w in workloads})
        results = {w.name: count_on_cpu(w, self.backend) for w in workloads}
        if self.instructions:
            for name, count in instructions_on_cpu(workloads, self.backend, self.processes).items():
                results[name]["host_instructions"] = count
        return results

    def remeasure(self, names: Iterable[str]) -> dict[str, Measurements]:
        return self.measure(self.measured[name] for name in names)


Tier = GpuTier | CpuTier


def make_tier(name: str, backend: Backend, instructions: bool = True) -> Tier:
    # Each gate run starts from a Dynamo that has compiled nothing, so every first call is cold.
    torch._dynamo.reset()
    return GpuTier(backend) if name == "gpu" else CpuTier(backend, instructions)
