"""The perf gate: fails a build on kernel-time, kernel-count or launch-overhead regressions.

    python -m perfgate gate --against main   # head and main side by side, in alternating processes
    python -m perfgate gate                  # counts against this architecture's committed file
    python -m perfgate update                # rewrite this architecture's baseline (a reviewable diff)
    python -m perfgate compare               # fuser, inductor and eager side by side

Modules: `workloads` (the programs, as data), `backends` (fuser, inductor, eager), `metrics` (what is
measured and how each metric is judged), `measure` and `instructions` (the measuring), `tiers` (gpu and
cpu), `planted` (testing-only slowdowns), `trees` (head, and base in a temporary worktree), `worker`
(one measuring process), `rounds` (processes in alternation), `baselines` (per-architecture files,
schema-checked), `verdict` (the interval rules), `gate`, `report`, `compare`, `cli`; `spread` measures
why a workload's kernel time varies between processes. The fuser is one backend among others, read
only through its public hooks.
"""
