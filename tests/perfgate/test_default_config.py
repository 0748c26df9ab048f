"""What users get by default is what the gate measures (issue 27): with no opt-in, every perf-gate
workload launches as many kernels as with unvalidated ops fused on purpose, a 10-op chain is one
kernel and a compiled SGD step with Nesterov momentum over 50 tensors is one launch.

These hold once the cpu manifest has a fresh entry for every op the workloads fuse; an op left eager
for want of one is named in the failure, with the fuser's reason.
"""

from __future__ import annotations

import pytest
import torch

import fuser
from perfgate.workloads import WORKLOADS, Step, pointwise_chain


@pytest.fixture(autouse=True)
def no_opt_in(monkeypatch):
    # tests/conftest.py opts in for the fuser's own tests, and the gate's fuser backend sets the variable
    # in the process: here the user's default is what is tested.
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)


# The fuser's reasons for leaving a lowerable op eager for want of a fresh manifest entry.
VALIDATION_REASONS = ("not validated", "validation is stale", "no validation manifest")


def unvalidated(graphs) -> str:
    """The ops these graphs left eager for want of validation, and the first reason given."""
    left = sorted(
        {(op, why) for g in graphs for op, why in g.fallbacks if any(r in why for r in VALIDATION_REASONS)}
    )
    return f"{', '.join(sorted({op for op, _ in left}))}; {left[0][0]}: {left[0][1]}" if left else "none"


def warm_call_launches(workload_name: str, **options) -> tuple[dict[str, int], str]:
    """A warm call's kernels and eager calls at the cpu_tiny size, as the gate counts them, and the ops
    the fuser left eager for want of validation while compiling."""
    torch._dynamo.reset()
    workload = WORKLOADS[workload_name]
    step = Step(
        workload,
        fuser.compile(workload.program, dynamic=False, **options),
        workload.inputs("cpu_tiny", "cpu"),
    )
    with fuser.collecting() as graphs:
        step()
    fuser.reset_counters()
    step()
    counts = fuser.counters()
    launched = {"kernels": counts["kernels_launched"], "eager calls": counts["extern_calls"]}
    return launched, unvalidated(graphs)


# Every workload's ops are validated on cpu (their fixes: records/validate-cpu-batch-2026-11-27.md),
# so the defaults launch what opting in launches; a stale or failed entry fails this, naming the op.
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_with_no_opt_in_a_gate_workload_launches_as_many_kernels_as_with_fuse(name):
    fused, _ = warm_call_launches(name, unvalidated="fuse")
    default, left_eager = warm_call_launches(name)
    assert default == fused, f"{name}: by default {default}, with fuse {fused}; not validated: {left_eager}"


def test_a_10_op_pointwise_chain_is_one_kernel_by_default():
    x, y = torch.randn(5, 129), torch.randn(5, 129)
    report = fuser.explain(pointwise_chain, x, y)
    assert (report.num_kernels, report.eager_calls) == (1, []), f"not validated: {unvalidated(report.graphs)}"
    torch.testing.assert_close(report.result, pointwise_chain(x, y))


def test_a_compiled_sgd_nesterov_step_over_50_tensors_is_one_launch_by_default():
    generator = torch.Generator().manual_seed(0)
    params = [torch.randn(1 + (i * 97) % 300, generator=generator).requires_grad_() for i in range(50)]
    reference = [p.detach().clone().requires_grad_() for p in params]
    for p, r in zip(params, reference, strict=True):
        p.grad = torch.randn(p.shape, generator=generator)
        r.grad = p.grad.clone()

    def sgd(tensors):
        return torch.optim.SGD(tensors, lr=1e-2, momentum=0.9, nesterov=True, foreach=True)

    step, eager_step = torch.compile(sgd(params).step, backend="fuser"), sgd(reference).step
    with fuser.collecting() as graphs:
        for _ in range(3):  # the first step makes the momentum buffers; the steady state's step is counted
            step()
            eager_step()
    fuser.reset_counters()
    step()
    counts = fuser.counters()
    eager_step()
    launched = (counts["kernels_launched"], counts["extern_calls"])
    assert launched == (1, 0), f"(kernels, eager calls) {launched}; not validated: {unvalidated(graphs)}"
    for p, r in zip(params, reference, strict=True):
        torch.testing.assert_close(p.detach(), r.detach())
