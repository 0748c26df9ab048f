"""A case whose op the backend ran eagerly inside its compiled graph checked eager against eager: the
runner says so (for the fuser, through `fuser.collecting`) and the report counts it."""

from __future__ import annotations

from conformance.catalog import SPECS
from conformance.report import CaseResult, _totals_line
from conformance.runner import run_case


def _run(op: str) -> str:
    return run_case(SPECS[op], "float32", "alone", "fwd", "fuser", "cpu", "quick").left_eager


def test_an_op_the_gate_leaves_eager_is_reported(monkeypatch):
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)  # the manifest gate on: sub is not validated
    assert "not validated on cpu" in _run("aten.sub.Tensor")


def test_a_fused_op_is_not_reported(monkeypatch):
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)
    assert _run("aten.neg.default") == ""  # validated on cpu: fused


def test_an_op_without_a_lowering_is_reported_even_when_opted_in(monkeypatch):
    monkeypatch.setenv("FUSER_UNVALIDATED", "fuse")
    assert "no lowering" in _run("aten.index_put.default")


def test_the_totals_line_counts_them():
    from conformance.caseid import CaseKey

    key = CaseKey("aten.sub.Tensor", "float32", "alone", "fwd", "fuser", "cpu")
    line = _totals_line(
        [CaseResult(key, "passed", 0.1, left_eager="not validated"), CaseResult(key, "passed", 0.1)]
    )
    assert "1 of them ran the op eagerly inside the backend" in line
