"""tools/gpu/default_config.py, the script of issue 27's GPU run (eager, Inductor and the fuser with
nothing set): its order of processes and its table, from records shaped like the gate worker's on a GPU,
checked here before a lent GPU's minutes are spent on it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "tools" / "gpu" / "default_config.py"
spec = importlib.util.spec_from_file_location("default_config", SCRIPT)
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)


def test_rounds_alternate_and_the_opted_in_fuser_runs_once_at_the_end():
    order = script.schedule(seed=1, rounds=3)
    first, second, third = order[0:3], order[3:6], order[6:9]
    assert sorted(first) == ["eager", "fuser", "inductor"]
    assert second == first[::-1] and third == first
    assert order[9:] == [script.FUSED]


def worker_record(kernel_ms: float, launches: int) -> dict:
    """One process's record of one workload, as perfgate.worker writes it on a GPU (reps trimmed)."""
    return {"kernel_time_ms": [kernel_ms, kernel_ms * 1.01, kernel_ms * 0.99], "kernel_launches": [launches]}


def test_the_table_gives_medians_of_process_medians_ratios_and_flags_launches_that_differ():
    times = {"eager": (1.0, 1.2, 1.1), "inductor": (0.5, 0.4, 0.6), "fuser": (0.3, 0.35, 0.25)}
    default_launches = {"swiglu": 1, "softmax": 7}  # softmax: the manifest left its ops eager
    results = {
        "device": "NVIDIA H100 80GB HBM3",
        "tier": "gpu",
        "torch": "2.11.0",
        "date": "2026-11-27",
        "commit": "0123456789abcdef",
        "seed": 1,
        "rounds": 3,
        "workloads": ["swiglu", "softmax"],
        "processes": {
            label: [
                {
                    w: worker_record(ms, default_launches[w] if label == "fuser" else 1)
                    for w in ("swiglu", "softmax")
                }
                for ms in times.get(label, (0.3,))
            ]
            for label in script.VARIANTS
        },
        "failed": {label: {} for label in script.VARIANTS},
    }
    rows = script.summary(results)
    assert rows["swiglu"]["kernel_time_ms"]["fuser"] == 0.3
    assert rows["swiglu"]["fuser/inductor"] == 0.3 / 0.5 and rows["swiglu"]["fuser/eager"] == 0.3 / 1.1
    assert rows["swiglu"]["default_launches_as_opted_in"] is True
    assert rows["softmax"]["default_launches_as_opted_in"] is False
    table = script.markdown(results, rows)
    assert "| swiglu | 1.1 | 0.5 | 0.3 | 0.60× | 0.27× | 1 | 1 | 1 | 1 |" in table
    assert "| softmax | 1.1 | 0.5 | 0.3 | 0.60× | 0.27× | 1 | 1 | 7 ≠ | 1 |" in table
    assert "differ from the opted-in ones** (≠) on softmax:" in table
