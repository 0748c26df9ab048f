"""A pytest plugin that writes when each process started, finished collecting, and ran each test, so a
parallel run's wall time can be split into start-up, collection, tests and idle time (issue 14, item 7).

    PYTHONPATH=tools TIMELINE_DIR=/tmp/tl pytest -p pytest_timeline -n 15 ...
    python tools/pytest_timeline.py /tmp/tl        # the summary

A test still running after TIMELINE_WATCHDOG_S seconds (default 120) gets every thread's stack written
to <worker>.stacks beside its timeline, so a run cut by a time limit shows what its last tests were
doing (compiling, launching, waiting).
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
from pathlib import Path

_STARTED = time.time()  # when this module was imported: the process's start, near enough
_STACKS = None  # the open file the watchdog writes to (faulthandler needs a real file)


def _folder() -> Path | None:
    folder = os.environ.get("TIMELINE_DIR")
    return Path(folder) if folder else None


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def _log(event: str, **fields) -> None:
    folder = _folder()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{_worker()}.jsonl", "a") as out:  # appended as it goes: survives a SIGINT
        out.write(json.dumps({"t": time.time(), "event": event, **fields}) + "\n")


def pytest_configure(config) -> None:
    global _STACKS
    _log("start", imported=_STARTED)
    folder = _folder()
    if folder is not None:
        _STACKS = open(folder / f"{_worker()}.stacks", "a")  # noqa: SIM115 (open for the process's life)


def pytest_collection_finish(session) -> None:
    _log("collected", items=len(session.items))


def pytest_runtest_logstart(nodeid, location) -> None:
    _log("test_start", id=nodeid)
    if _STACKS is not None:
        _STACKS.write(f"\n--- {nodeid} (started {time.time():.1f})\n")
        _STACKS.flush()
        faulthandler.dump_traceback_later(float(os.environ.get("TIMELINE_WATCHDOG_S", "120")), file=_STACKS)


def pytest_runtest_logfinish(nodeid, location) -> None:
    if _STACKS is not None:
        faulthandler.cancel_dump_traceback_later()
    _log("test_end", id=nodeid)


def summary(folder: Path, slowest: int = 15) -> str:
    rows, t0 = [], min(json.loads(f.open().readline())["imported"] for f in folder.glob("gw*.jsonl"))
    walls, unfinished, last_end = [], [], 0.0
    for path in sorted(folder.glob("gw*.jsonl")):
        events = [json.loads(line) for line in path.open()]
        starts = [e for e in events if e["event"] == "test_start"]
        ends = [e for e in events if e["event"] == "test_end"]
        collected = next((e["t"] for e in events if e["event"] == "collected"), None)
        tests = [(b["t"] - a["t"], a.get("id", "?")) for a, b in zip(starts, ends, strict=False)]
        walls += tests
        busy = sum(wall for wall, _ in tests)
        # between one test's end and the next one's start: the worker waits for work (or runs hooks)
        idle = sum(a["t"] - b["t"] for b, a in zip(ends, starts[1:], strict=False))
        if len(starts) > len(ends):
            unfinished.append(
                f"{path.stem}: {starts[-1].get('id', '?')} (started at {starts[-1]['t'] - t0:.1f} s)"
            )
        last_end = max([last_end] + [e["t"] - t0 for e in ends])
        rows.append(
            f"{path.stem:>5}: import {events[0]['imported'] - t0:6.1f}  configured {events[0]['t'] - t0:6.1f}  "
            f"collected {collected - t0 if collected else float('nan'):6.1f}  "
            f"first test {starts[0]['t'] - t0 if starts else float('nan'):6.1f}  "
            f"last end {ends[-1]['t'] - t0 if ends else float('nan'):6.1f}  tests {len(ends):4d}  "
            f"in tests {busy:6.1f} s  between tests {idle:6.1f} s"
        )
    rows.append(f"last test ended at {last_end:.1f} s")
    rows.append(f"started, never finished ({len(unfinished)}):")
    rows += [f"  {line}" for line in unfinished]
    rows.append(f"slowest {slowest} tests (start to finish, setup and teardown included):")
    rows += [f"  {wall:7.1f} s  {nodeid}" for wall, nodeid in sorted(walls, reverse=True)[:slowest]]
    return "\n".join(rows)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
