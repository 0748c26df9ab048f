"""A sample eager raises on is dropped from the comparison, but at the full tier the compiled program must
raise on it too: an answer where eager gives an error is a silent wrong answer (`runner.answers_where_eager_raised`)."""

from __future__ import annotations

from conformance.harness.runner import run_case
from conformance.specs.catalog import SPECS

PLANTED = "tests.conformance.planted_backends:max_of_nothing"
EMPTY = "sample [contiguous (5, 0) dim=None keepdim=None]: eager raised (RuntimeError: max(): Expected reduction dim"


def failures(backend: str, tier: str) -> list[str]:
    return run_case(SPECS["aten.max.default"], "float32", "alone", "fwd", backend, "cpu", tier).failures


def test_an_answer_where_eager_raised_fails_the_full_tier():
    found = failures(PLANTED, "full")
    assert [f for f in found if f.startswith(EMPTY)] == found
    assert len(found) == 1 and found[0].endswith("but the compiled program returned a value")


def test_a_backend_that_raises_as_eager_does_passes():
    assert failures("aot_eager", "full") == []


def test_the_quick_tier_spends_no_compile_on_it():
    # One compile a distinct error of eager's: the full tier's cost, not CI's quick tier's.
    assert failures(PLANTED, "quick") == []
