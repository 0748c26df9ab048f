"""Every test here checks the fuser's kernels, so an op the fuser left eager because the validation
manifest does not enable it fails the test: unchecked, that test would compare eager with eager and pass.

The tests run with no opt-in (issue 27: the default is what is tested), so this names each op that is
not validated for the test's architecture and dtype. Tests of the gate itself are marked
`validation_gate`; a test that checks a lowering the manifest leaves out on purpose is marked
`opt_in_unvalidated("why")` (tests/conftest.py), and so fuses it.
"""

from __future__ import annotations

import os

import pytest

import fuser
from fuser.runtime import compile_pool

# The fuser's reasons for leaving a lowerable op eager because of the manifest (fuser/validate/validation.py).
VALIDATION_REASONS = ("not validated", "validation is stale", "no validation manifest")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "validation_gate: a test of the validation gate: ops it leaves eager are expected"
    )


def unvalidated(graphs) -> list[tuple[str, str]]:
    """(op, reason) for each node of these graphs the fuser ran eagerly because it is not validated."""
    return [
        (op, reason)
        for graph in graphs
        for op, reason in graph.fallbacks
        if any(words in reason for words in VALIDATION_REASONS)
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if item.get_closest_marker("validation_gate"):
        return (yield)
    with fuser.collecting() as graphs:  # sees `fuser.explain` and a test's own `collecting` too
        try:
            return (yield)
        finally:
            if left := unvalidated(graphs):
                ops = sorted({op for op, _ in left})
                # Raised in `finally`: a test that failed for it (a kernel count, say) shows both.
                raise AssertionError(
                    f"the fuser ran {', '.join(ops)} eagerly: not validated here, so this test compared "
                    f"eager with eager ({left[0][1]})"
                )


@pytest.fixture
def hand_steps_over_to(monkeypatch):
    """Have each compiled graph hand every step's compiles over to `pool` (its `submit` takes a job), from
    where the compiler calls `compile_pool.ahead`, as a CUDA first call does by default. The CPU's steps
    are interpreted, so the real `ahead` hands nothing over there."""

    def hand_over_to(pool) -> None:
        def ahead(steps, key):
            compile_pool.hand_over([s for s in steps if hasattr(s, "compile_ahead")], key, 90, pool)

        monkeypatch.setattr(compile_pool, "ahead", ahead)

    return hand_over_to


class _Taking:
    """A pool that takes every job and compiles nothing."""

    def submit(self, compile_job):
        return None


@pytest.fixture(autouse=True)
def hand_every_step_over(request, hand_steps_over_to):
    """Every CPU test also runs the launches made for the compiles ahead (session 21: a horizontal kernel's
    tables were fake tensors, and only the CUDA tests saw it). On a GPU the real `ahead` runs.
    FUSER_TEST_HAND_OVER=0 turns it off (the conformance suite runs the CPU's configuration as users get
    it)."""
    off = os.environ.get("FUSER_TEST_HAND_OVER", "1") != "1"
    if (
        off
        or os.environ.get("FUSER_TEST_DEVICE") == "cuda"
        or request.module.__name__.endswith("test_compile_pool")
    ):
        return  # off, on a GPU (the real `ahead` compiles), or a test of `ahead` itself
    hand_steps_over_to(_Taking())
