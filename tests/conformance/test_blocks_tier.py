"""Quality: the model-block tier, run as users run it, fails a block whose lowering is planted wrong and
names the node that first disagrees — in the forward, and where only the backward is wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_blocks(
    selection: str, wrong_lowering: str | None = None, backend: str = "fuser"
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FUSER_TESTING_WRONG_LOWERING"}
    env["FUSER_STRICT"] = "1"
    if wrong_lowering:
        env["FUSER_TESTING_WRONG_LOWERING"] = wrong_lowering
    command = [
        sys.executable,
        "-m",
        "pytest",
        "conformance/",
        "--conformance-tier",
        "models",
        "-p",
        "no:cacheprovider",
    ]
    command += ["-p", "no:xdist", "-q", "-k", selection, "--conformance-backend", backend]
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests" / "conformance"), env.get("PYTHONPATH", "")])
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_the_models_tier_runs_only_blocks_and_passes_them():
    clean = run_blocks("llama_block and fp32")
    assert clean.returncode == 0, clean.stdout[-3000:]
    assert "1 passed" in clean.stdout and "failed" not in clean.stdout


def test_a_wrong_lowering_fails_its_block_and_the_bisection_names_the_node():
    # RMSNorm's rsqrt lowered wrong (plus one): the first node that disagrees is the rsqrt itself.
    result = run_blocks("llama_block and fp32", wrong_lowering="aten.rsqrt.default")
    assert result.returncode == 1, result.stdout[-3000:]
    line = next((x for x in result.stdout.splitlines() if "first disagreement: graph" in x), "")
    assert "node rsqrt (rsqrt) at blocks.py" in line and "value: error" in line, result.stdout[-3000:]


def test_a_backend_wrong_only_in_the_backward_is_bisected_to_a_gradient():
    # The forward is right, silu's backward is 1.5 times too large: the bisection names the silu node
    # and a gradient, not a value.
    result = run_blocks("llama_block and fp32", backend="planted_backends:wrong_silu_backward")
    assert result.returncode == 1, result.stdout[-3000:]
    line = next((x for x in result.stdout.splitlines() if "first disagreement: graph" in x), "")
    assert "node silu (silu) at blocks.py" in line and "gradient of input" in line, result.stdout[-3000:]
