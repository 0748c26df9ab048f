"""How the CPU tier counts a compile (`perfgate.instructions`): the parts that need no valgrind."""

from __future__ import annotations

import contextlib
import gc

from perfgate import instructions


def test_the_counted_compile_runs_with_the_collector_off(monkeypatch):
    # Where a collection falls depends on every allocation before it: one landing inside the counted
    # step moved a workload's compile count by up to 12% between runs (docs/perfgate.md).
    seen = []

    class Observed:
        def compile_observer(self):
            return lambda on, off: contextlib.nullcontext()

    def step():
        seen.append(gc.isenabled())

    monkeypatch.setattr(instructions, "_compiled", lambda job: (step, Observed()))
    for name in ("_count_on", "_count_off", "_callgrind_control"):
        monkeypatch.setattr(instructions, name, lambda *args: None)
    monkeypatch.setattr(instructions.torch._C, "_valgrind_toggle", lambda: None)
    monkeypatch.setattr(instructions.torch._C, "_valgrind_toggle_and_dump_stats", lambda: None)
    instructions._measure({"count_compile": True})
    assert seen[0] is False  # the compiling call
    assert all(seen[1:]) and gc.isenabled()  # the warm calls after it, and the process after that
