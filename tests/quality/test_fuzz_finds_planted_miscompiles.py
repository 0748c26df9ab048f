"""Quality tests: the fuzzer's `ci` profile finds each planted miscompile and shrinks it to at most three
ops (nodes plus view steps).

Each kind lives between ops, where single-op tests in one context tend to miss it (fuser/testing/miscompiles.py
says what each changes; docs/fuzz.md says which the conformance quick tier's single-op cases catch and
which they miss).

Each run is the command a user runs, in a fresh process. The `ci` profile draws from a fixed seed and from
hypothesis' own constants only (conformance/fuzz/run.py), so edits elsewhere in the repository do not
change its programs (they once did: CI missed a kind that way).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fuser.testing.miscompiles import ENV, KINDS

REPO = Path(__file__).resolve().parents[2]

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
def test_the_ci_profile_finds_a_planted_miscompile_and_shrinks_it_to_three_ops(kind, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSER_TESTING_")} | {ENV: kind}
    command = [
        sys.executable,
        "-m",
        "conformance.fuzz",
        "--profile",
        "ci",
        "--no-backward",
        "--out",
        str(tmp_path),
    ]
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    summary = run.stdout + run.stderr[-3000:]
    assert run.returncode == 1, f"exit {run.returncode}: the planted {kind} was not found\n{summary}"
    shrunk = re.search(r"FAILED, shrunk from (\d+) to (\d+) op", run.stdout)
    assert shrunk is not None, summary
    assert int(shrunk.group(2)) <= 3, summary
    assert list(tmp_path.glob("repro_*.py")), summary
