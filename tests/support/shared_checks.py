"""The check the product's tests share: a program compiled by the fuser gives eager's answer, leaves its
inputs as eager leaves them, and really ran kernels (a program run eagerly would match eager vacuously).
Tests import it as `from shared_checks import fused_matches_eager`: pyproject's pytest `pythonpath` holds
tests/support/ (not tests/, whose fuser/ folder would shadow the fuser package for a `pytest` run)."""

from __future__ import annotations

from collections.abc import Callable

import torch

import fuser
from fuser.explain import ExplainReport


def fused_matches_eager(
    program,
    *args,
    kernels: int | None = None,
    compare: Callable[[list[torch.Tensor], list[torch.Tensor]], None] | None = None,
    **tolerance,
) -> ExplainReport:
    """`program(*args)` compiled by the fuser against eager on copies of the same inputs: every result and
    every input after the call equal (`torch.testing.assert_close`, nan equal to nan, `tolerance` passed
    on), dtypes and shapes alike; and the fuser launched `kernels` kernels (at least one if not given;
    `kernels=0` for a program whose results are all empty: there is nothing to launch).
    `compare(fused, eager)`, given each side's results (flattened lists), judges them instead of
    assert_close, by a rule of the test's own (signs of zeros, distance from a float64 run); dtypes,
    shapes, inputs and launches are checked all the same. Returns the fuser's report (its kernels' sources,
    what it left eager)."""
    eager_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    expected = program(*eager_args)
    before = fuser.counters()["kernels_launched"]
    report = fuser.explain(program, *args)
    launched = fuser.counters()["kernels_launched"] - before
    if kernels is None:
        assert launched > 0, f"no kernel ran: eager was checked against eager\n{report}"
    else:
        assert launched == kernels, f"{launched} kernel launches, expected {kernels}\n{report}"
    fused, eager = _flat(report.result), _flat(expected)
    for got, want in zip(fused, eager, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape, (
            got.dtype,
            got.shape,
            want.dtype,
            want.shape,
        )
        if compare is None:
            torch.testing.assert_close(got, want, equal_nan=True, **tolerance)
    if compare is not None:
        compare(fused, eager)
    for have, want in zip(args, eager_args, strict=True):
        if isinstance(have, torch.Tensor):
            torch.testing.assert_close(have, want, equal_nan=True, **tolerance)
    return report


def _flat(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for item in value for t in _flat(item)]
    return []
