"""Quality tests: the conformance suite, run as users run it (pytest with the plugin, in a fresh process),
fails on a planted miscompile, fails when an expected failure starts passing, and refuses a ledger
entry that matches nothing.

The miscompile is the fuser's testing-only switch FUSER_TESTING_WRONG_LOWERING (never set by default):
it makes one overload's lowering add one to its value.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ONE_CASE = [
    "--conformance-op",
    "aten.mul.Tensor",
    "--conformance-dtype",
    "float32",
    "--conformance-direction",
    "fwd",
]


def run_suite(*options: str, wrong_lowering: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FUSER_TESTING_WRONG_LOWERING"}
    env["FUSER_STRICT"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests" / "conformance"), env.get("PYTHONPATH", "")])
    if wrong_lowering:
        env["FUSER_TESTING_WRONG_LOWERING"] = wrong_lowering
    command = [
        sys.executable,
        "-m",
        "pytest",
        "conformance/test_ops.py",
        "-p",
        "no:cacheprovider",
        "-q",
        *options,
    ]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def ledger_file(
    tmp_path: Path,
    *,
    op: str = "aten.mul.Tensor",
    dtype: str = "float32",
    backend: str = "fuser",
    varies: bool = False,
) -> Path:
    path = tmp_path / "expected_failures.toml"
    path.write_text(
        f'[[xfail]]\nop = "{op}"\nbackend = "{backend}"\ndevice = "cpu"\ndtype = "{dtype}"\n'
        'direction = "fwd"\ncontext = "alone"\nreason = "planted for this test"\n'
        + ("outcome_varies = true\n" if varies else "")
    )
    return path


def test_a_wrong_lowering_fails_its_cases_alone_and_fused():
    # The full tier runs every context for every dtype (the quick tier rotates the fused ones).
    contexts = ["--conformance-tier", "full", "--conformance-context", "alone,producer,consumer"]
    clean = run_suite(*ONE_CASE, *contexts)
    assert clean.returncode == 0, clean.stdout[-3000:]
    planted = run_suite(*ONE_CASE, *contexts, wrong_lowering="aten.mul.Tensor")
    assert planted.returncode == 1, planted.stdout[-3000:]
    assert "3 failed" in planted.stdout
    assert "further from float64 than eager is" in planted.stdout or "differ" in planted.stdout
    # Every failure names the one command that reruns exactly it.
    assert (
        "nox -s conformance -- --conformance-backend fuser --conformance-device cpu --conformance-tier full --conformance-op aten.mul.Tensor"
        in planted.stdout
    )


def test_a_wrong_lowering_of_another_op_leaves_these_cases_passing():
    result = run_suite(*ONE_CASE, "--conformance-context", "alone", wrong_lowering="aten.add.Tensor")
    assert result.returncode == 0, result.stdout[-3000:]


def test_an_expected_failure_that_passes_fails_the_run(tmp_path: Path):
    result = run_suite(
        *ONE_CASE, "--conformance-context", "alone", "--conformance-ledger", str(ledger_file(tmp_path))
    )
    assert result.returncode == 1, result.stdout[-3000:]
    assert "XPASS(strict)" in result.stdout


def test_an_expected_failure_that_fails_is_reported_as_expected(tmp_path: Path):
    result = run_suite(
        *ONE_CASE,
        "--conformance-context",
        "alone",
        "--conformance-ledger",
        str(ledger_file(tmp_path)),
        wrong_lowering="aten.mul.Tensor",
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 xfailed" in result.stdout


def test_a_ledger_entry_matching_no_case_is_refused(tmp_path: Path):
    # bool is a dtype the suite knows, but mul's backward has no bool case: the entry can never match.
    path = tmp_path / "expected_failures.toml"
    path.write_text(
        '[[xfail]]\nop = "aten.mul.Tensor"\nbackend = "fuser"\ndevice = "cpu"\ndtype = "bool"\n'
        'direction = "bwd"\nreason = "a typo"\n'
    )
    result = run_suite("--collect-only", "--conformance-ledger", str(path))
    assert result.returncode != 0
    assert "match no case" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (["--conformance-op", "aten.mull.Tensor"], "--conformance-op: unknown aten.mull.Tensor"),
        (["--conformance-dtype", "float17"], "float17"),
        (["--conformance-backend", "nonsense"], "module:callable"),
    ],
)
def test_bad_options_are_usage_errors_that_name_the_problem(options, complaint):
    result = run_suite("--collect-only", *options)
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    assert complaint in result.stdout + result.stderr


def test_an_in_place_miscompile_counts_each_sample_once():
    # mul_ becomes mul + copy_ in the graph: the planted error shows in the output and in the input the
    # call wrote, and the summary still counts samples, not comparisons.
    result = run_suite(
        "--conformance-op",
        "aten.mul_.Tensor",
        "--conformance-dtype",
        "float32",
        "--conformance-context",
        "alone",
        wrong_lowering="aten.mul.Tensor",
    )
    assert result.returncode == 1, result.stdout[-3000:]
    match = re.search(r"(\d+) of (\d+) samples differ from eager", result.stdout)
    assert match, result.stdout[-3000:]
    assert int(match.group(1)) <= int(match.group(2))
    assert "output:" in result.stdout and "inputs after the call:" in result.stdout


def test_values_a_spec_leaves_unspecified_are_skipped_in_results_and_in_inputs_written_in_place():
    # i0 at ±inf: eager's CPU kernel gives inf, its CUDA kernel nan (seen on an H100), so the spec leaves
    # it unspecified there; the planted backend gives 0 there. i0_ writes its result into its input, so
    # "inputs after the call" are compared too.
    ops = [
        "--conformance-dtype",
        "float32",
        "--conformance-direction",
        "fwd",
        "--conformance-context",
        "alone",
    ]
    backend = ["--conformance-backend", "planted_backends:i0_zero_at_inf"]
    skipped = run_suite(
        "--conformance-op", "aten.i0.default", "--conformance-op", "aten.i0_.default", *ops, *backend
    )
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    assert "2 passed" in skipped.stdout


def test_a_case_that_hangs_fails_at_its_time_limit_with_where_it_was_and_the_run_goes_on(tmp_path):
    hanging = [
        "--conformance-backend",
        "planted_backends:hangs",
        "--conformance-context",
        "alone",
        "--conformance-case-time-limit",
        "3",
    ]
    result = run_suite(*ONE_CASE, *hanging)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert "ran past its time limit of 3 s" in result.stdout
    assert "planted_backends.py" in result.stdout  # where it was
    # The ledger can expect it like any other failure (a known hang of a PyTorch version).
    expected = run_suite(
        *ONE_CASE, *hanging, "--conformance-ledger", str(ledger_file(tmp_path, backend=hanging[1]))
    )
    assert expected.returncode == 0, expected.stdout[-3000:]
    assert "1 xfailed" in expected.stdout


def test_an_expected_failure_whose_outcome_varies_may_pass_without_an_xpass(tmp_path):
    # Eager's own answer can vary from run to run (a CUDA kernel's atomics); such an entry is not strict.
    ledger = ledger_file(tmp_path, varies=True)
    result = run_suite(*ONE_CASE, "--conformance-context", "alone", "--conformance-ledger", str(ledger))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 cases: 1 passed, 0 failed, 0 xfailed, 0 xpassed" in result.stdout, result.stdout[-3000:]


def test_a_negative_case_time_limit_is_a_usage_error_that_names_it():
    result = run_suite(*ONE_CASE, "--conformance-case-time-limit", "-5")
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    assert "--conformance-case-time-limit -5: seconds, 0 or more" in result.stderr + result.stdout
