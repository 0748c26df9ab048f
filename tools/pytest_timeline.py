"""A pytest plugin that writes when each process started, finished collecting, and ran each test, so a
parallel run's wall time can be split into start-up, collection, tests and idle time (issue 14, item 7).

    PYTHONPATH=tools TIMELINE_DIR=/tmp/tl pytest -p pytest_timeline -n 15 ...
    python tools/pytest_timeline.py /tmp/tl        # the summary
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

_STARTED = time.time()  # when this module was imported: the process's start, near enough


def _log(event: str, **fields) -> None:
    folder = os.environ.get("TIMELINE_DIR")
    if not folder:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{worker}.jsonl", "a") as out:  # appended as it goes: survives a SIGINT
        out.write(json.dumps({"t": time.time(), "event": event, **fields}) + "\n")


def pytest_configure(config) -> None:
    _log("start", imported=_STARTED)


def pytest_collection_finish(session) -> None:
    _log("collected", items=len(session.items))


def pytest_runtest_logstart(nodeid, location) -> None:
    _log("test_start")


def pytest_runtest_logfinish(nodeid, location) -> None:
    _log("test_end")


def summary(folder: Path) -> str:
    rows, t0 = [], min(json.loads(f.open().readline())["imported"] for f in folder.glob("gw*.jsonl"))
    for path in sorted(folder.glob("gw*.jsonl")):
        events = [json.loads(line) for line in path.open()]
        starts = [e["t"] for e in events if e["event"] == "test_start"]
        ends = [e["t"] for e in events if e["event"] == "test_end"]
        collected = next((e["t"] for e in events if e["event"] == "collected"), None)
        busy = sum(b - a for a, b in zip(starts, ends, strict=False))
        rows.append(
            f"{path.stem:>5}: import {events[0]['imported'] - t0:6.1f}  configured {events[0]['t'] - t0:6.1f}  "
            f"collected {collected - t0 if collected else float('nan'):6.1f}  first test {starts[0] - t0 if starts else float('nan'):6.1f}  "
            f"last end {ends[-1] - t0 if ends else float('nan'):6.1f}  tests {len(ends):4d}  in tests {busy:6.1f} s"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
