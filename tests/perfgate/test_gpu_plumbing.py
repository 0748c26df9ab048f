"""The GPU tier's plumbing, run on the CPU with a stand-in for CUDA: CI has no GPU, and a typo in code
only a GPU runs would otherwise surface on the GPU machine. Timings here are wall clock and mean
nothing; the tests check that every step runs and writes what it should.
"""

from __future__ import annotations

import json
import time
import types

import pytest
import torch

import perfgate.gpu_validation
import perfgate.measure
import perfgate.tiers
from perfgate.backends import BACKENDS
from perfgate.gate import run_gate, run_update
from perfgate.machine import Machine
from perfgate.tiers import GpuTier
from perfgate.verdict import Status
from perfgate.workloads import WORKLOADS, Workload


class WallClockEvent:
    def __init__(self, enable_timing: bool = False):
        self.at = 0.0

    def record(self) -> None:
        self.at = time.perf_counter()

    def elapsed_time(self, end: WallClockEvent) -> float:
        return (end.at - self.at) * 1e3


@pytest.fixture
def stand_in_for_cuda(monkeypatch):
    """torch.cuda's timing calls on the CPU, the GPU tier on the CPU device, every size tiny."""
    monkeypatch.setattr(torch.cuda, "Event", WallClockEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(L2_cache_size=2**20)
    )
    monkeypatch.setattr(
        perfgate.tiers, "this_machine", lambda tier: Machine("gpu", "sm_90", "stand-in", None)
    )
    monkeypatch.setattr(GpuTier.__init__, "__defaults__", ("cpu",))
    tiny = Workload.inputs
    monkeypatch.setattr(Workload, "inputs", lambda self, size, device: tiny(self, "cpu_tiny", "cpu"))
    monkeypatch.setattr(perfgate.measure, "MIN_REPS", 3)
    monkeypatch.setattr(perfgate.measure, "MAX_REPS", 5)
    monkeypatch.setattr(perfgate.measure, "HOST_BATCHES", 3)
    monkeypatch.setattr(perfgate.measure, "HOST_CALLS", (2, 3))


def test_a_gpu_update_then_gate_records_and_judges_every_gpu_metric(stand_in_for_cuda, tmp_path):
    workloads = [WORKLOADS["pointwise_chain"]]
    run_update(GpuTier(BACKENDS["fuser"]), workloads, tmp_path)
    section = json.loads((tmp_path / "sm_90.json").read_text())["backends"]["fuser"]
    assert set(section["devices"]["stand-in"]["workloads"]["pointwise_chain"]) == {
        "kernel_time_ms",
        "host_time_us",
        "compile_time_s",
        "bandwidth_fraction",
    }
    result = run_gate(GpuTier(BACKENDS["fuser"]), workloads, tmp_path)
    statuses = {v.metric.name: v.status for v in result.verdicts}
    assert statuses["kernel_launches"] is Status.OK and statuses["compile_time_s"] is Status.INFO
    unjudged = (Status.NO_BASELINE, Status.NO_DEVICE_BASELINE, Status.NOT_MEASURED)
    assert statuses["kernel_time_ms"] not in unjudged and statuses["host_time_us"] not in unjudged


def test_the_gpu_validation_runs_end_to_end_and_writes_its_results(stand_in_for_cuda, tmp_path, monkeypatch):
    counted = perfgate.measure.launches_per_call
    # The profiler sees no CUDA kernels on the CPU: count with the fuser's counters instead.
    monkeypatch.setattr(
        perfgate.gpu_validation,
        "launches_per_call",
        lambda step, backend, device: counted(step, BACKENDS["fuser"], device),
    )
    assert perfgate.gpu_validation.main(["--out", str(tmp_path), "--quick"]) == 0
    results = json.loads((tmp_path / "gpu_validation.json").read_text())
    assert results["unchanged"]["runs"] == 3 and results["injected"]["runs"] == 5
    assert results["workloads"] == ["pointwise_chain", "softmax"]
    assert (tmp_path / "sm_90.json").exists()
    # Each suspect is recorded with the ratios of its first pass and of every re-run it took.
    for run in results["unchanged"]["per_run"]:
        for suspect in run["suspects"].values():
            assert set(suspect) == {"ratio", "rerun_ratios", "verdict"} and suspect["rerun_ratios"]
    assert all(len(run["rerun_ratios"]) <= 1 for run in results["injected"]["per_run"])
