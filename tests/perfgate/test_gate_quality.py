"""Quality: the CPU-tier gate, run on the real fuser, fails on planted regressions and passes unchanged code.

The baseline is measured once per test session (shared between xdist workers through a file lock),
with fusion on. Each measurement runs one valgrind process: the tests share two cores with each other. The planted backends are top-level functions here because the instruction counts run
in a valgrind process, which loads them from this file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from filelock import FileLock

import fuser
from perfgate.backends import BACKENDS, Backend
from perfgate.gate import run_gate, run_update
from perfgate.metrics import METRICS
from perfgate.tiers import CpuTier
from perfgate.verdict import Status
from perfgate.workloads import WORKLOADS

CHAIN = WORKLOADS["pointwise_chain"]
QUALITY_WORKLOADS = [CHAIN, WORKLOADS["bias_gelu"]]
# About 4% of a fuser call's instructions on the tiny chain: well past the tolerance, small enough to be
# the kind of slip (a dict rebuilt per launch, a debug check left on) a review would miss.
PLANTED_ITERATIONS = 3_000


def fuser_without_fusion(program):
    return fuser.compile(program, dynamic=False, fuse=False)


def fuser_with_a_slow_launch_path(program):
    compiled = fuser.compile(program, dynamic=False)

    def launch(*args):
        for _ in range(PLANTED_ITERATIONS):  # the planted slowdown: busy work on every call
            pass
        return compiled(*args)

    return launch


@pytest.fixture(scope="session")
def fused_baseline(tmp_path_factory) -> Path:
    """A directory holding cpu.json, measured with the fuser as it is (fusion on)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    directory = base.parent / f"perfgate-baseline-{run}" if run else base / "perfgate-baseline"
    with FileLock(f"{directory}.lock"):
        if not (directory / "cpu.json").exists():
            run_update(CpuTier(BACKENDS["fuser"], processes=1), QUALITY_WORKLOADS, directory)
    return directory


def statuses(result) -> dict[str, Status]:
    return {f"{v.workload}.{v.metric.name}": v.status for v in result.verdicts}


needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="counts instructions with valgrind (apt-get install valgrind)"
)


@needs_valgrind
def test_re_measuring_unchanged_code_passes_with_every_metric_ok(fused_baseline):
    result = run_gate(CpuTier(BACKENDS["fuser"], processes=1), QUALITY_WORKLOADS, fused_baseline, strict=True)
    assert not result.failed
    assert set(statuses(result).values()) == {Status.OK}, statuses(result)


@needs_valgrind
def test_turning_fusion_off_for_one_workload_raises_its_launches_and_fails_the_gate(fused_baseline):
    unfused = Backend("fuser", fuser_without_fusion, counted_by_fuser=True)
    result = run_gate(CpuTier(unfused, instructions=False), [CHAIN], fused_baseline)
    assert result.failed
    (launches,) = [v for v in result.verdicts if v.metric is METRICS["kernel_launches"]]
    assert launches.status is Status.REGRESSION
    assert launches.baseline.median == 1 and launches.now.median == 10
    assert statuses(result)["pointwise_chain.bytes_moved"] is Status.OK


@needs_valgrind
def test_a_planted_slowdown_in_the_launch_path_fails_the_instruction_count_check(fused_baseline):
    slowed = Backend("fuser", fuser_with_a_slow_launch_path, counted_by_fuser=True)
    result = run_gate(CpuTier(slowed), [CHAIN], fused_baseline)
    assert result.failed
    assert statuses(result) == {
        "pointwise_chain.kernel_launches": Status.OK,
        "pointwise_chain.bytes_moved": Status.OK,
        "pointwise_chain.host_instructions": Status.REGRESSION,
    }
    (instructions,) = [v for v in result.verdicts if v.metric is METRICS["host_instructions"]]
    assert instructions.ratio > 1 + 2 * METRICS["host_instructions"].threshold
