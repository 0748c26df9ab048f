"""The optimizer-step program family (`conformance.harness.optimizers`) under the run's `--conformance-backend` and
`--conformance-device`, in the `models` tier with the model blocks (`nox -s conformance -- --conformance-tier models`, or
`pytest conformance/test_optimizers.py --conformance-tier models`)."""

from __future__ import annotations

import pytest

from conformance.harness.optimizers import PROGRAMS, run_program
from conformance.plugin import selection


@pytest.mark.parametrize("name", PROGRAMS)
def test_optimizer_step_matches_eager(name: str, request: pytest.FixtureRequest) -> None:
    chosen = selection(request.config)
    run = run_program(PROGRAMS[name], chosen.backend, chosen.device)
    if run.failures:
        raise AssertionError(
            f"optimizer program {name} on {chosen.backend}/{chosen.device}: " + "\n".join(run.failures)
        )
