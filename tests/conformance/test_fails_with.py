"""A ledger entry's `fails_with`: a case the entry covers that fails with another message fails the run, in a
real pytest run of the plugin. Session 42 found smooth_l1_loss's nan gradient hidden by an entry written for
a zero-size failure of the same cases; planted here as a backend whose silu gradient is 1.5 times eager's."""

from __future__ import annotations

from pathlib import Path

from suite_run import run_suite

BACKEND = "planted_backends:wrong_silu_backward"
ENTRY = """
[[xfail]]
op = "aten.silu.default"
backend = "planted_backends:wrong_silu_backward"
device = "cpu"
dtype = "float32"
direction = "bwd"
context = "alone"
reason = "planted: silu's gradient is 1.5 times eager's"
"""


def run(tmp_path: Path, ledger: str):
    path = tmp_path / "expected_failures.toml"
    path.write_text(ledger)
    return run_suite(
        "-p", "no:xdist", "--conformance-ledger", str(path), "--conformance-backend", BACKEND,
        "--conformance-op", "aten.silu.default", "--conformance-dtype", "float32",
        "--conformance-direction", "bwd", "--conformance-context", "alone",
    )  # fmt: skip


def test_a_failure_the_entry_names_is_expected_and_another_fails_the_run(tmp_path):
    plain = run(tmp_path, ENTRY)
    assert plain.returncode == 0 and "1 xfailed" in plain.stdout, plain.stdout[-2000:]
    named = run(tmp_path, ENTRY + 'fails_with = "gradients: "\n')  # each failing sample's message
    assert named.returncode == 0 and "1 xfailed" in named.stdout, named.stdout[-2000:]
    other = run(tmp_path, ENTRY + 'fails_with = "ZeroDivisionError"\n')
    assert other.returncode == 1 and "1 failed" in other.stdout, other.stdout[-2000:]
    assert (
        "FailedOtherwise" in other.stdout
        and "expects this case to fail with /ZeroDivisionError/" in other.stdout
    )
