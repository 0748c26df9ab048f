"""Baseline files: schema-checked, one per architecture, with timings kept per device name."""

from __future__ import annotations

import jsonschema
import pytest

from perfgate import baselines
from perfgate.gate import GateRequest, judge_samples
from perfgate.machine import Machine
from perfgate.metrics import Sample
from perfgate.verdict import Status, failed

H100 = Machine("gpu", "sm_90", "NVIDIA H100 80GB HBM3", "570.1")
H200 = Machine("gpu", "sm_90", "NVIDIA H200", "570.1")


def measured(kernel_ms: float, launches: int = 1) -> dict:
    return {
        "softmax": {
            "kernel_launches": Sample.exact(launches),
            "bytes_moved": Sample.exact(268435456),
            "kernel_time_ms": Sample(kernel_ms, 0.001, 50),
        }
    }


def test_updating_on_one_device_keeps_the_other_devices_timings():
    data = baselines.updated(None, H100, "fuser", measured(0.20))
    data = baselines.updated(data, H200, "fuser", measured(0.14))
    on_h100, known = baselines.expected(data, "fuser", H100.device)
    assert known
    assert on_h100["softmax"]["kernel_time_ms"].median == 0.20
    on_h200, _ = baselines.expected(data, "fuser", H200.device)
    assert on_h200["softmax"]["kernel_time_ms"].median == 0.14


def test_counts_are_shared_by_every_device_of_the_architecture():
    data = baselines.updated(None, H100, "fuser", measured(0.20, launches=2))
    on_h200, known = baselines.expected(data, "fuser", H200.device)
    assert not known
    assert on_h200["softmax"]["kernel_launches"].median == 2
    assert "kernel_time_ms" not in on_h200["softmax"]


def test_a_device_without_a_section_gets_no_baseline_for_this_device_not_a_comparison(tmp_path):
    baselines.write(
        baselines.baseline_path("sm_90", tmp_path), baselines.updated(None, H100, "fuser", measured(0.20))
    )
    samples = {"head": {w: {m: [s] for m, s in ms.items()} for w, ms in measured(0.14).items()}}
    request = GateRequest("gpu", ["softmax"], absolute=True, baseline_dir=tmp_path)
    verdicts, _, known = judge_samples(samples, H200, request, seed=0)
    assert not known
    statuses = {v.metric.name: v.status for v in verdicts}
    assert statuses == {
        "kernel_launches": Status.OK,
        "bytes_moved": Status.OK,
        "kernel_time_ms": Status.NO_DEVICE_BASELINE,
    }


def test_a_baseline_round_trips_through_its_file(tmp_path):
    path = baselines.baseline_path("sm_90", tmp_path)
    baselines.write(path, baselines.updated(None, H100, "fuser", measured(0.20)))
    expected, _ = baselines.expected(baselines.load(path), "fuser", H100.device)
    assert expected["softmax"]["kernel_time_ms"] == Sample(0.20, 0.001, 50)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d["backends"]["fuser"]["any_device"]["workloads"]["softmax"].update(kernel_lanches=1),
        lambda d: d["backends"]["fuser"]["any_device"]["workloads"].update(sofmax={}),
        lambda d: d["backends"]["fuser"]["any_device"]["workloads"]["softmax"].update(kernel_time_ms=1.0),
        lambda d: d["backends"]["fuser"]["devices"][H100.device]["recorded"].pop("commit"),
        lambda d: d.update(architecture="hopper"),
    ],
    ids=["misspelt metric", "misspelt workload", "timing outside a device", "no commit", "bad architecture"],
)
def test_the_schema_rejects_a_spoilt_baseline(tmp_path, spoil):
    data = baselines.updated(None, H100, "fuser", measured(0.20))
    spoil(data)
    path = tmp_path / "sm_90.json"
    baselines.write(path, data)
    with pytest.raises(jsonschema.ValidationError):
        baselines.load(path)


def test_a_run_on_another_architecture_cannot_update_the_file():
    data = baselines.updated(None, H100, "fuser", measured(0.20))
    a100 = Machine("gpu", "sm_80", "NVIDIA A100-SXM4-80GB", "570.1")
    with pytest.raises(ValueError, match="sm_80"):
        baselines.updated(data, a100, "fuser", measured(0.30))


def test_the_committed_baselines_pass_the_schema():
    files = sorted(baselines.BASELINE_DIR.glob("*.json"))
    assert [f.name for f in files if f.name == "cpu.json"] == ["cpu.json"]
    for path in files:
        assert baselines.load(path)["architecture"] == path.stem


def test_the_committed_sm_90_file_holds_the_optimizer_steps_as_horizontal_kernels_and_fails_more():
    # Recorded on an H100 (2026-11-26, docs/perfgate.md): AdamW's step in 2 kernels, SGD's in 1. A head
    # that launches a kernel per parameter (horizontal fusion lost) fails against the file on any GPU.
    data = baselines.load(baselines.baseline_path("sm_90"))
    counts, known = baselines.expected(data, "fuser", H100.device)
    assert known
    assert counts["adam_step"]["kernel_launches"].median <= 2
    assert counts["sgd_momentum_step"]["kernel_launches"].median <= 2
    samples = {
        "head": {
            workload: {"kernel_launches": [Sample.exact(200)]}
            for workload in ("adam_step", "sgd_momentum_step")
        }
    }
    request = GateRequest("gpu", ["adam_step", "sgd_momentum_step"])
    verdicts, _, _ = judge_samples(samples, H100, request, seed=0)
    assert {v.status for v in verdicts} == {Status.REGRESSION}
    assert failed(verdicts, strict=False)


def test_forgetting_a_workload_drops_it_from_every_backend_and_device_and_keeps_the_rest():
    data = baselines.updated(None, H100, "fuser", measured(0.20))
    data = baselines.updated(data, H200, "inductor", measured(0.14))
    data = baselines.forgotten(data, ["softmax", "not_measured_anyway"])
    for backend, device in (("fuser", H100.device), ("inductor", H200.device)):
        assert baselines.expected(data, backend, device) == ({}, True)
