"""The suite: one test per case, parametrized by the conformance plugin (see conformance/plugin.py).

Run it with `nox -s conformance` (or `pytest conformance/test_ops.py --backend ... --device ...`).
"""

from __future__ import annotations

import pytest

from conformance.caseid import CaseKey
from conformance.catalog import SPECS
from conformance.runner import run_case


def test_op_matches_eager(conformance_case: CaseKey, request: pytest.FixtureRequest, record_property) -> None:
    key = conformance_case
    run = run_case(
        SPECS[key.op],
        key.dtype,
        key.context,
        key.direction,
        key.backend,
        key.device,
        request.config.getoption("tier"),
    )
    record_property("samples", run.samples)
    if run.ulps is not None:
        record_property("ulps", run.ulps)
    if run.left_eager:
        record_property("left_eager", run.left_eager)
    if run.failures:
        shown = "\n".join(run.failures[:5])
        more = f"\n... and {len(run.failures) - 5} more samples" if len(run.failures) > 5 else ""
        raise AssertionError(
            f"{key.test_id}: {len(run.failures)} of {run.samples} samples differ from eager\n{shown}{more}"
        )
