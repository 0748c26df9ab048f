"""Fuzz whole fused programs: random graphs of the suite's ops against eager, shrunk to minimal repros.

    python -m conformance.fuzz --backend fuser --profile dev          # or: nox -s fuzz -- ...

Modules, one job each: `vocab` (the ops, from the conformance specs), `program` (the program as data
and its source), `strategies` (hypothesis strategies that draw and resolve programs), `check` (eager,
float64 reference and backend under the suite's oracle), `repro` (standalone `repro_<id>.py` files),
`run` (profiles and the loop). How to read a repro and what the fuzzer found: docs/fuzz.md.
"""

from conformance.fuzz.run import PROFILES, FuzzReport, fuzz

__all__ = ["PROFILES", "FuzzReport", "fuzz"]
