"""One measuring process of a gate run: `python -m perfgate.worker SPEC.json RECORD.json`.

The gate starts one per tree per round (`perfgate.rounds`), in the tree's directory with the tree first
on PYTHONPATH, so `import fuser` is that tree's compiler, while `perfgate` — the workloads and the
measuring — is head's in every tree. SPEC names the tier, backend and workloads; RECORD receives this
machine, the file `fuser` was imported from, each workload's measurements (every metric's
repetitions) and the slowdowns planted for testing, or the workload that failed and why.

With `"warm": true` in SPEC it measures nothing: it compiles and calls each workload once at the sizes
the GPU tier measures, so that the kernels are in the on-disk caches (Triton's, the fuser's) before the
measuring processes start (`perfgate.rounds.Rounds.warm`); RECORD then lists the workloads warmed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import torch

import fuser
from perfgate.backends import BACKENDS
from perfgate.tiers import WorkloadFailed, make_tier
from perfgate.workloads import WORKLOADS, Step


def main(spec_path: str, record_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    if spec.get("warm"):
        Path(record_path).write_text(json.dumps({"warmed": warm(spec)}))
        return 0
    tier = make_tier(spec["tier"], BACKENDS[spec["backend"]], instructions=spec["instructions"])
    record = {"machine": dataclasses.asdict(tier.machine), "fuser": fuser.__file__}
    try:
        measured = tier.measure(WORKLOADS[name] for name in spec["workloads"])
    except WorkloadFailed as failure:
        record["failed"] = {"workload": failure.workload, "error": str(failure)}
    else:
        record["measurements"] = {
            workload: {name: None if s is None else list(s.values) for name, s in metrics.items()}
            for workload, metrics in measured.items()
        }
        record["planted"] = tier.planted
    Path(record_path).write_text(json.dumps(record))
    return 3 if "failed" in record else 0


def warm(spec: dict) -> list[str]:
    """Compile and call each workload once at the GPU tier's sizes; the names of those that ran (one
    that fails here fails again, with its error, in the measuring processes)."""
    backend, warmed = BACKENDS[spec["backend"]], []
    for name in spec["workloads"]:
        workload = WORKLOADS[name]
        try:
            compiled = backend.compile(workload.program)
            for size in ("gpu", "gpu_tiny"):
                Step(workload, compiled, workload.inputs(size, "cuda"))()
            torch.cuda.synchronize()
        except Exception:  # reported by the measuring process, which runs it again
            continue
        warmed.append(name)
    return warmed


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
