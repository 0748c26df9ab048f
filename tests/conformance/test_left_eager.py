"""A case whose op the backend ran eagerly inside its compiled graph checked eager against eager: the
runner says so (for the fuser, through `fuser.collecting`) and the report counts it. Where the reason is
that the op is not validated (the fuser's manifest gate), the case fails as "not validated"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.harness.report import CaseResult, _totals_line
from conformance.harness.runner import run_case
from conformance.specs.catalog import SPECS
from fuser.validate import validation

REPO = Path(__file__).resolve().parents[2]


def without_entry(op: str, folder: Path) -> Path:
    """A copy of the shipped cpu manifest without `op`'s entry (the shipped one validates every op)."""
    blocks = validation.manifest_path("cpu").read_text().split("[[op]]")
    folder.mkdir()
    (folder / "cpu.toml").write_text("[[op]]".join(b for b in blocks if f'op = "{op}"' not in b))
    return folder


@pytest.fixture
def hypot_unvalidated(tmp_path, monkeypatch) -> Path:
    """The gate on, and hypot with no cpu entry."""
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)
    monkeypatch.setattr(validation, "MANIFEST_DIR", without_entry("aten.hypot.default", tmp_path / "m"))
    validation.reload()
    yield validation.MANIFEST_DIR
    monkeypatch.undo()
    validation.reload()


def _run(op: str) -> str:
    return run_case(SPECS[op], "float32", "alone", "fwd", "fuser", "cpu", "quick").left_eager


def test_an_op_the_gate_leaves_eager_is_reported(hypot_unvalidated):
    assert "not validated on cpu" in _run("aten.hypot.default")


def test_a_fused_op_is_not_reported(monkeypatch):
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)
    assert _run("aten.neg.default") == ""  # validated on cpu: fused


def test_an_op_without_a_lowering_is_reported_even_when_opted_in(monkeypatch):
    monkeypatch.setenv("FUSER_UNVALIDATED", "fuse")
    assert "no lowering" in _run("aten.index_put.default")


def test_the_totals_line_counts_them():
    from conformance.specs.caseid import CaseKey

    key = CaseKey("aten.hypot.default", "float32", "alone", "fwd", "fuser", "cpu")
    line = _totals_line(
        [CaseResult(key, "passed", 0.1, left_eager="not validated"), CaseResult(key, "passed", 0.1)]
    )
    assert "1 of them ran the op eagerly inside the backend" in line


def test_only_a_validation_reason_makes_a_case_not_validated(hypot_unvalidated, monkeypatch):
    assert run_case(
        SPECS["aten.hypot.default"], "float32", "alone", "fwd", "fuser", "cpu", "quick"
    ).not_validated
    monkeypatch.setenv("FUSER_UNVALIDATED", "fuse")
    no_lowering = run_case(
        SPECS["aten.index_put.default"], "float32", "alone", "fwd", "fuser", "cpu", "quick"
    )
    assert no_lowering.left_eager and not no_lowering.not_validated


def test_a_wrong_lowering_of_an_unvalidated_op_is_never_a_green_pass(tmp_path):
    # As a user runs it, without the opt-in: hypot has no cpu entry here, so the fuser runs it eagerly and
    # eager matches eager. Each case fails as not validated, a ledgered one too (its expected failure did
    # not happen: nothing was tested), and the report counts them apart.
    ledger = tmp_path / "expected_failures.toml"
    ledger.write_text(
        '[[xfail]]\nop = "aten.hypot.default"\nbackend = "fuser"\ndevice = "cpu"\ndtype = "bfloat16"\n'
        'direction = "fwd"\ncontext = "alone"\nreason = "planted for this test"\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "FUSER_UNVALIDATED"}
    env |= {"FUSER_STRICT": "1", "FUSER_TESTING_WRONG_LOWERING": "aten.hypot.default"}
    env["FUSER_MANIFEST_DIR"] = str(without_entry("aten.hypot.default", tmp_path / "m"))
    options = [
        "--conformance-op",
        "aten.hypot.default",
        "--conformance-dtype",
        "float32,bfloat16",
        "--conformance-context",
        "alone",
    ]
    options += [
        "--conformance-direction",
        "fwd",
        "--conformance-ledger",
        str(ledger),
        "--conformance-report",
        str(tmp_path),
    ]
    command = [sys.executable, "-m", "pytest", "conformance/test_ops.py", "-p", "no:cacheprovider", "-q"]
    result = subprocess.run(
        [*command, *options], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 1, result.stdout[-3000:]
    assert "0 passed, 0 failed, 0 xfailed, 0 xpassed, 0 skipped, 0 errors, 2 not validated" in result.stdout
    assert (
        "NotValidated: aten.hypot.default-float32-alone-fwd: not validated: fuser ran aten.hypot.default eagerly"
        in result.stdout
    )
    assert "nox -s validate -- aten.hypot.default" in result.stdout
    cases = json.loads((tmp_path / "conformance-fuser-cpu.json").read_text())["cases"]
    assert [case["outcome"] for case in cases] == ["not_validated", "not_validated"]
