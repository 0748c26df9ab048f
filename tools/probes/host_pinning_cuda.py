"""Why does the gate's host_relative not settle on unchanged code (issue 30)? Runs the gate's own
measuring process (`python -m perfgate.worker`) on one tree, fresh each time, under several CPU
placements, interleaved, and prints each placement's process-to-process spread of host_relative:

    python tools/probes/host_pinning_cuda.py --processes 6 --out DIR add_layer_norm_backward bias_gelu

Placements: `two` (the gate's: the last two CPUs), `one` (the last CPU alone: a training step's autograd
thread then hands off on the same core) and `none` (unpinned). DIR/processes.json keeps every process's
batches (wall µs and relative), to try other statistics on offline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PLACEMENTS = ("two", "one", "none")


def cpus(placement: str) -> set[int] | None:
    allowed = sorted(os.sched_getaffinity(0))
    return {"two": set(allowed[-2:]), "one": set(allowed[-1:]), "none": None}[placement]


def one_process(workloads: list[str], placement: str, scratch: Path, number: int) -> dict:
    spec, record = scratch / f"spec-{number}.json", scratch / f"record-{number}.json"
    spec.write_text(
        json.dumps({"tier": "gpu", "backend": "fuser", "instructions": False, "workloads": workloads})
    )
    env = os.environ | {"PYTHONHASHSEED": "0"}
    process = subprocess.Popen([sys.executable, "-m", "perfgate.worker", str(spec), str(record)], env=env)
    pinned = cpus(placement)
    if pinned:
        os.sched_setaffinity(process.pid, pinned)
    if process.wait() != 0:
        raise SystemExit(f"process {number} ({placement}) failed")
    return json.loads(record.read_text())["measurements"]


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f}, max/min {max(values) / min(values):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workloads", nargs="+")
    parser.add_argument("--processes", type=int, default=6, help="per placement")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for number in range(args.processes * len(PLACEMENTS)):
        placement = PLACEMENTS[number % len(PLACEMENTS)]
        measured = one_process(args.workloads, placement, args.out, number)
        rows.append({"placement": placement, "measurements": measured})
        print(
            placement,
            "  ".join(
                f"{w} rel {statistics.median(m['host_relative']):.2f} us {statistics.median(m['host_time_us']):.1f}"
                for w, m in measured.items()
            ),
            flush=True,
        )
        (args.out / "processes.json").write_text(json.dumps(rows))
    print("\nhost_relative, process medians, per placement:")
    for workload in args.workloads:
        for placement in PLACEMENTS:
            medians = [
                statistics.median(r["measurements"][workload]["host_relative"])
                for r in rows
                if r["placement"] == placement
            ]
            print(f"  {workload:26} {placement:5} {spread(medians)}  {[round(m, 2) for m in medians]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
