"""Python's cyclic garbage collector, tuned for a process that compiles thousands of small programs.

Each compile allocates hundreds of thousands of short-lived objects (FX graphs, Dynamo's trackers,
Triton's ASTs); at the default threshold of 700 the collector runs every few hundred of them and walks
the whole young heap each time, and every gen-2 pass walks torch's and sympy's import-time objects.
Measured on a quick-tier sample (records/ci-time-2026-12-05-s30.md): 17 % of the run's wall time.
Freezing what exists after import takes those objects out of every later pass, and a gen-0 threshold of
50,000 lets most of a compile's garbage die by reference count before a pass starts. Cycles are still
collected (Dynamo itself calls `gc.collect(1)` after each compile), only less often.

Less often is a risk where cyclic garbage holds large buffers: a gen-2 pass then comes too late. Triton's
interpreter leaves each launch's CPU copies of its arguments in a cycle (`GridExecutor`'s closures), and
a full-tier case on the CPU makes hundreds of megabytes of them; a long `--conformance-tier full` run
reached 13-14 GB a worker and was killed. So the suite's processes call `collect_if_grown()` between
units of work (each test, zoo model and fuzz program): a full pass once the process's memory (resident, plus the
current GPU's allocated memory) has grown by `GROWTH_BYTES` since the last one. A pass costs about 0.1 s,
too much after every quick-tier case, and nothing between passes.

Used by this repository's own pytest runs and its batch tools; not by the opt-in plugin another
project loads (its process, its collector), and never by perfgate's measured processes, whose
instruction counts would shift with it."""

from __future__ import annotations

import atexit
import gc
import os
import resource
import sys

# (gen-0 allocations, gen-0 passes per gen-1 pass, gen-1 passes per gen-2 pass); the default is (700, 10, 10).
THRESHOLDS = (50_000, 50, 50)
GROWTH_BYTES = 1 << 30

_after_last_pass: int | None = None  # memory_in_use() after the last full pass (or the first call)


def tune_for_compiling() -> None:
    """Freeze what exists now and raise the gen-0 threshold; call it once, after the heavy imports."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    collect_if_grown()  # the starting point
    # Frozen objects are skipped by the collection at interpreter exit too, and nanobind (Triton's
    # bindings) then prints a "leaked" report for each of its objects among them.
    atexit.register(gc.unfreeze)


def collect_if_grown(growth_bytes: int = GROWTH_BYTES) -> bool:
    """A full collection if memory grew by `growth_bytes` since the last one; whether it ran."""
    global _after_last_pass
    used = memory_in_use()
    grown = _after_last_pass is not None and used - _after_last_pass >= growth_bytes
    if grown:
        gc.collect()
    if grown or _after_last_pass is None:
        # Freed memory stays resident (the allocator keeps it for reuse): measure growth from here.
        _after_last_pass = memory_in_use()
    return grown


def memory_in_use() -> int:
    """Bytes: this process's resident set (its peak where /proc is missing) plus the current GPU's
    allocated memory, where this process uses a GPU (garbage tensors hold it too)."""
    try:
        with open("/proc/self/statm") as statm:
            resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        resident = peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        resident += torch.cuda.memory_allocated()
    return resident
