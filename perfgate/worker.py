"""One measuring process of a gate run: `python -m perfgate.worker SPEC.json RECORD.json`.

The gate starts one per tree per round (`perfgate.rounds`), in the tree's directory with the tree first
on PYTHONPATH, so `import fuser` is that tree's compiler, while `perfgate` — the workloads and the
measuring — is head's in every tree. SPEC names the tier, backend and workloads; RECORD receives this
machine, the file `fuser` was imported from, each workload's measurements (every metric's
repetitions) and the slowdowns planted for testing, or the workload that failed and why.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import fuser
from perfgate.backends import BACKENDS
from perfgate.tiers import WorkloadFailed, make_tier
from perfgate.workloads import WORKLOADS


def main(spec_path: str, record_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
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


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
