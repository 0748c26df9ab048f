"""Python's cyclic garbage collector, tuned for a process that compiles thousands of small programs.

Each compile allocates hundreds of thousands of short-lived objects (FX graphs, Dynamo's trackers,
Triton's ASTs); at the default threshold of 700 the collector runs every few hundred of them and walks
the whole young heap each time, and every gen-2 pass walks torch's and sympy's import-time objects.
Measured on a quick-tier sample (records/ci-time-2026-12-05-s30.md): 17 % of the run's wall time.
Freezing what exists after import takes those objects out of every later pass, and a gen-0 threshold of
50,000 lets most of a compile's garbage die by reference count before a pass starts. Cycles are still
collected (Dynamo itself calls `gc.collect(1)` after each compile), only less often.

Used by this repository's own pytest runs and its batch tools; not by the opt-in plugin another
project loads (its process, its collector), and never by perfgate's measured processes, whose
instruction counts would shift with it."""

from __future__ import annotations

import atexit
import gc

# (gen-0 allocations, gen-0 passes per gen-1 pass, gen-1 passes per gen-2 pass); the default is (700, 10, 10).
THRESHOLDS = (50_000, 50, 50)


def tune_for_compiling() -> None:
    """Freeze what exists now and raise the gen-0 threshold; call it once, after the heavy imports."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    # Frozen objects are skipped by the collection at interpreter exit too, and nanobind (Triton's
    # bindings) then prints a "leaked" report for each of its objects among them.
    atexit.register(gc.unfreeze)
