"""One measurement in a fresh Python process: the benchmark scripts that compare backends or variants run
each sample this way (timings are compared only between fresh processes of one run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def measure(script: str, args: list[str], what: str, env: dict[str, str] | None = None) -> dict:
    """Run `python script *args` and return the JSON object its last line prints; a failure raises with
    the end of its stderr, naming `what` was measured."""
    command = [sys.executable, script, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env or os.environ)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
