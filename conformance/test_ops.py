"""The suite: one test per case, parametrized by the conformance plugin (see conformance/plugin.py).

Run it with `nox -s conformance` (or `pytest conformance/test_ops.py --conformance-backend ... --conformance-device ...`).

A case whose op the backend ran eagerly because it is not validated for this architecture and dtype (the
fuser without FUSER_UNVALIDATED=fuse, where its manifest has no fresh entry) compared eager with eager:
it fails with `NotValidated` (one line: the op, the backend's reason, the validate command) and the report
counts it as "not validated", never as a pass.
"""

from __future__ import annotations

import re

import pytest

from conformance import plugin
from conformance.harness.runner import NotValidated, run_case
from conformance.specs.caseid import CaseKey
from conformance.specs.catalog import SPECS

# The fuser's reason for a validated op whose entry leaves this dtype out (fuser/validate/validation.py).
DTYPE_LEFT_OUT = re.compile(r"not validated on \S+ for \w+ \(validated: ")


class FailedOtherwise(Exception):
    """A case the ledger expects to fail, failing with a message its entry's `fails_with` does not match. Not an
    AssertionError: the entry's xfail (raises=AssertionError) must not absorb another bug in its cases."""


def failed_otherwise(request: pytest.FixtureRequest, failures: list[str]) -> FailedOtherwise | None:
    """FailedOtherwise where the ledger's entry for the case names a failure one of `failures` (each failing
    sample's, or the compiled program's error) does not match."""
    expected = request.node.get_closest_marker("conformance_fails_with")
    other = next((f for f in failures if not re.search(expected.args[0], f)), None) if expected else None
    if other is None:
        return None
    return FailedOtherwise(
        f"{other}\n(the ledger expects this case to fail with /{expected.args[0]}/ in every failing sample: "
        "this one failed otherwise)"
    )


def test_op_matches_eager(conformance_case: CaseKey, request: pytest.FixtureRequest, record_property) -> None:
    key = conformance_case
    try:
        run = run_case(
            SPECS[key.op],
            key.dtype,
            key.context,
            key.direction,
            key.backend,
            key.device,
            plugin.get(request.config, "tier"),
        )
    except AssertionError as error:  # the compiled program raised
        if (otherwise := failed_otherwise(request, [str(error)])) is not None:
            raise otherwise from error
        raise
    record_property("samples", run.samples)
    if run.ulps is not None:
        record_property("ulps", run.ulps)
    if run.left_eager:
        record_property("left_eager", run.left_eager)
    if run.failures:
        shown = "\n".join(run.failures[:5])
        more = f"\n... and {len(run.failures) - 5} more samples" if len(run.failures) > 5 else ""
        message = (
            f"{key.test_id}: {len(run.failures)} of {run.samples} samples differ from eager\n{shown}{more}"
        )
        if (otherwise := failed_otherwise(request, run.failures)) is not None:
            raise otherwise
        raise AssertionError(message)
    if run.not_validated:
        # The backend ran the op eagerly by policy: eager matched eager, so the case fails as "not
        # validated" (the report's own outcome) rather than pass having tested nothing — unless the op is
        # validated but this dtype was left out of its entry because the ledger expects this case to
        # fail: that is the expected failure, and the ledger says why.
        record_property("not_validated", True)
        if DTYPE_LEFT_OUT.search(run.left_eager) and request.node.get_closest_marker("xfail"):
            raise AssertionError(f"{key.test_id}: left out of the manifest by a ledgered failure")
        raise NotValidated(f"{key.test_id}: {not_validated_message(key, run.left_eager)}")


def not_validated_message(key: CaseKey, reason: str) -> str:
    """One line: what ran eagerly, the backend's reason, and the command that validates the op."""
    message = f"not validated: {key.backend} ran {key.op} eagerly, so nothing was tested ({reason})"
    if "nox -s validate" not in reason:
        backend = [] if key.backend == "fuser" else ["--backend", key.backend]
        device = [] if key.device == "cpu" else ["--device", key.device]
        message += f"; validate it with `nox -s validate -- {' '.join([*backend, *device, key.op])}`"
    return message
