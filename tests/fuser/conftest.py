"""Every test here checks the fuser's kernels, so an op the fuser left eager because the validation
manifest does not enable it fails the test: unchecked, that test would compare eager with eager and pass.

The tests run with no opt-in (issue 27: the default is what is tested), so this names each op that is
not validated for the test's architecture and dtype. Tests of the gate itself are marked
`validation_gate`; a test that checks a lowering the manifest leaves out on purpose is marked
`opt_in_unvalidated("why")` (tests/conftest.py), and so fuses it.
"""

from __future__ import annotations

import pytest

import fuser

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
