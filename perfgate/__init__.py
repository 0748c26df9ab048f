"""The perf gate: fails a build on kernel-time, kernel-count or launch-overhead regressions.

Its content arrives with its own issue; it will read the fuser only through public counters.
"""
