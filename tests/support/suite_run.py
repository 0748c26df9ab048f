"""The conformance suite run as users run it: `pytest conformance/test_ops.py` in a fresh process, for tests of
the plugin's command-line behaviour (resume, the ledger)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "conformance"  # planted_backends.py, importable as a module:callable backend


def run_suite(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", str(ROOT / "conformance" / "test_ops.py"), "-q"]
    command += ["-p", "no:benchmark", "-p", "no:cacheprovider", *args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PLANTED), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
