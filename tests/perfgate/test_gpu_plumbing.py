"""The GPU tier's plumbing, run on the CPU with a stand-in for CUDA: CI has no GPU, and a typo in code
only a GPU runs would otherwise surface on the GPU machine. Timings here are wall clock and mean
nothing; the tests check that every step runs and writes what it should.
"""

from __future__ import annotations

import json
import os
import time
import types

import pytest
import torch

import perfgate.measure
import perfgate.tiers
from perfgate import planted, worker
from perfgate.backends import BACKENDS
from perfgate.gate import run_update
from perfgate.machine import Machine
from perfgate.tiers import GpuTier
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
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
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


def test_a_gpu_update_records_every_gpu_metric(stand_in_for_cuda, tmp_path):
    run_update(GpuTier(BACKENDS["fuser"]), [WORKLOADS["pointwise_chain"]], tmp_path)
    section = json.loads((tmp_path / "sm_90.json").read_text())["backends"]["fuser"]
    assert set(section["devices"]["stand-in"]["workloads"]["pointwise_chain"]) == {
        "kernel_time_ms",
        "host_time_us",
        "host_relative",
        "compile_time_s",
        "bandwidth_fraction",
    }


def test_a_gpu_measuring_process_records_every_repetition_and_the_slowdowns_planted(
    stand_in_for_cuda, tmp_path, monkeypatch
):
    monkeypatch.setattr(perfgate.tiers, "copy_peak_bytes_per_s", lambda device: 1e9)
    monkeypatch.setenv(planted.ENV, "kernel:pointwise_chain,host:*")
    spec = {
        "tier": "gpu",
        "backend": "fuser",
        "instructions": True,
        "workloads": ["pointwise_chain", "softmax"],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert worker.main(str(tmp_path / "spec.json"), str(tmp_path / "record.json")) == 0
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["machine"]["device"] == "stand-in" and record["fuser"].endswith("fuser/__init__.py")
    chain = record["measurements"]["pointwise_chain"]
    assert len(chain["kernel_time_ms"]) >= perfgate.measure.MIN_REPS and chain["kernel_launches"] == [1]
    assert set(record["planted"]) == {
        "pointwise_chain"
    }  # the kernel slowdown; the host delay is not measured


def test_the_host_delay_adds_fifteen_microseconds_to_each_call():
    delayed = planted.WithHostDelay(lambda: None)
    started = time.perf_counter()
    for _ in range(100):
        delayed()
    assert (time.perf_counter() - started) / 100 >= planted.HOST_DELAY_S


def test_a_slowdown_switch_must_name_a_kind_and_a_workload(monkeypatch):
    monkeypatch.setenv(planted.ENV, "kernel:softmax")
    assert planted.requested("softmax") == {"kernel": 0.10} and planted.requested("rms_norm") == {}
    monkeypatch.setenv(planted.ENV, "slower")
    with pytest.raises(ValueError, match=r"is not KIND\[=SIZE\]:WORKLOAD"):
        planted.requested("softmax")


def test_a_slowdown_may_have_a_size_other_than_the_thresholds_were_set_from(monkeypatch):
    monkeypatch.setenv(planted.ENV, "kernel=0.07:softmax,host=8:*")
    assert planted.requested("softmax") == {"kernel": 0.07, "host": 8.0}
    assert planted.requested("rms_norm") == {"host": 8.0}
    for bad, reason in (("host=fast:*", "is not a number"), ("kernel=0:*", "must be positive")):
        monkeypatch.setenv(planted.ENV, bad)
        with pytest.raises(ValueError, match=reason):
            planted.requested("softmax")


def test_a_sized_host_delay_spends_its_own_size():
    delayed = planted.WithHostDelay(lambda: None, 40e-6)
    started = time.perf_counter()
    for _ in range(100):
        delayed()
    assert (time.perf_counter() - started) / 100 >= 40e-6


def test_gpu_measuring_processes_are_pinned_to_one_allowed_cpu_unless_turned_off(monkeypatch):
    from perfgate import rounds

    allowed = os.sched_getaffinity(0)
    cpus = rounds.measuring_cpus()
    if len(allowed) >= 4:
        assert cpus is not None and len(cpus) == 1 and cpus <= allowed
    else:
        assert cpus is None  # too few CPUs to set one aside
    monkeypatch.setenv(rounds.UNPINNED_ENV, "1")
    assert rounds.measuring_cpus() is None


def test_measuring_processes_hash_alike():
    from perfgate import rounds

    env = rounds._environment(types.SimpleNamespace(role="base", path="/x"))
    assert env["PYTHONHASHSEED"] == "0" and env["PYTHONPATH"].startswith("/x")


def test_warming_compiles_each_workload_and_leaves_out_one_that_fails(stand_in_for_cuda, monkeypatch):
    # The gate's warm-up processes (perfgate.rounds.Rounds.warm) run this: every workload compiled and
    # called once, so the measuring processes find the kernels in the on-disk caches.
    import fuser

    broken = WORKLOADS["softmax"]
    monkeypatch.setitem(WORKLOADS, "softmax", Workload(**{**vars(broken), "program": lambda *args: 1 / 0}))
    fuser.reset_counters()
    warmed = worker.warm({"backend": "fuser", "workloads": ["pointwise_chain", "softmax"]})
    assert warmed == ["pointwise_chain"]
    assert fuser.counters()["kernels_launched"] > 0


def test_the_warm_up_starts_one_process_per_tree_and_workload_in_that_tree(tmp_path):
    # The processes really start, in the tree's directory, with the warm spec: each writes its record.
    # (Without a GPU each workload fails to warm and is left out, as the measuring process would report.)
    from perfgate.rounds import Rounds
    from perfgate.trees import head_tree

    logged = []
    rounds = Rounds([head_tree(committed=False)], {"tier": "gpu", "backend": "fuser", "instructions": False},
                    seed=0, scratch=tmp_path, log=logged.append)  # fmt: skip
    rounds.warm(["pointwise_chain", "softmax"], processes=2)
    records = {r.name.split("-")[-1].removesuffix(".json.out"): r for r in tmp_path.glob("warm-*.json.out")}
    assert sorted(records) == ["pointwise_chain", "softmax"]
    for name, record in records.items():
        assert json.loads(record.read_text())["warmed"] == ([name] if torch.cuda.is_available() else [])
    assert logged[-1].startswith("compiled 2 workload(s) in 1 tree(s) beforehand")


def test_a_training_workloads_yardstick_goes_through_autograds_engine():
    from perfgate.measure import reference_call

    (gradient,) = reference_call("cpu", training=True)()
    assert torch.equal(gradient, torch.ones(8))
    assert not reference_call("cpu")().requires_grad
