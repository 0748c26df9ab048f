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

# Issue 15's six kinds, the ones that live between ops (the others in KINDS are the conformance suite's
# catching table's, measured by tools/catching_table.py).
SIX = [
    "broadcast_stride_dropped",
    "epilogue_neighbour_row",
    "cast_before_last_op",
    "swap_computed_operands",
    "tail_mask",
    "inplace_reads_own_output",
]
PLANTED = SIX  # all six met since the fuzzer judges a program eager has no backward for on its forward


def test_the_six_planted_kinds_exist_and_take_no_argument():
    assert all(kind in KINDS and not KINDS[kind].takes_argument for kind in SIX)


@pytest.mark.parametrize("kind", PLANTED)
def test_the_ci_profile_finds_a_planted_miscompile_and_shrinks_it_to_three_ops(kind, monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, kind)
    report = fuzz("fuser", "cpu", "ci", out=tmp_path, backward=False)
    assert report.failure is not None, report.summary()
    assert report.failure.op_count <= 3, report.summary()
    assert report.repro is not None and report.repro.exists()
