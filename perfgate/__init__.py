"""The perf gate: fails a build on kernel-time, kernel-count or launch-overhead regressions.

    python -m perfgate gate      # measure this machine's tier and judge against its baseline
    python -m perfgate update    # rewrite this architecture's baseline (a reviewable diff)
    python -m perfgate compare   # fuser, inductor and eager side by side

Modules: `workloads` (the programs, as data), `backends` (fuser, inductor, eager), `metrics` (what is
measured and how each metric is judged), `measure` and `instructions` (the measuring), `tiers` (gpu and
cpu), `baselines` (per-architecture files, schema-checked), `verdict` (the noise model), `gate`,
`report`, `compare`, `cli`; `gpu_validation` checks the gate's false-alarm and catch rates on a GPU.
The fuser is one backend among others, read only through its public hooks.
"""
