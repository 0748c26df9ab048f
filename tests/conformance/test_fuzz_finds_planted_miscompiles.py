"""Quality tests: the fuzzer's `ci` profile finds each planted miscompile and shrinks it to at most three
ops (nodes plus view steps).

Each kind lives between ops, where single-op tests in one context tend to miss it (fuser/miscompiles.py
says what each changes; docs/fuzz.md says which the conformance quick tier's single-op cases catch and
which they miss). The kind is read at each compile, so one process serves every kind in turn.
"""

from __future__ import annotations

import pytest

from conformance.fuzz import fuzz
from fuser.miscompiles import ENV, KINDS

PLANTED = [kind for kind in KINDS if not KINDS[kind].takes_argument]


def test_there_are_six_planted_kinds_that_take_no_argument():
    assert len(PLANTED) >= 6


@pytest.mark.parametrize("kind", PLANTED)
def test_the_ci_profile_finds_a_planted_miscompile_and_shrinks_it_to_three_ops(kind, monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, kind)
    report = fuzz("fuser", "cpu", "ci", out=tmp_path, backward=False)
    assert report.failure is not None, report.summary()
    assert report.failure.op_count <= 3, report.summary()
    assert report.repro is not None and report.repro.exists()
