"""What users get by default (issue 27): eager, Inductor (torch.compile's default backend) and the fuser
side by side on every perf-gate workload, with nothing set, plus the fuser's launches with the opt-in.

    python tools/gpu/default_config.py --out DIR                      # GPU: 3 rounds of fresh processes
    python tools/gpu/default_config.py --out DIR --tier cpu --workload swiglu   # the plumbing, on a CPU

Each variant is measured in fresh processes of the gate's own measuring worker (`perfgate.worker`: the
gate's kernel time, launches and bytes), alternating: the first round's order is drawn from the seed and
each round reverses the one before, so a drift over the run weighs on every variant alike. A variant's
kernel time is the median of its processes' medians. Launches are the gate's count: the fuser's kernels
plus the aten calls it left eager; the profiler's CUDA kernels for eager and Inductor (none on the CPU).

The fuser runs with FUSER_UNVALIDATED unset (an op its architecture's manifest does not validate runs
eagerly), and once more with FUSER_UNVALIDATED=fuse, for its launches with every lowering on. Exit
status 1 where the two differ (the manifest leaves something eager that the fuser could fuse), 2 when the
run cannot measure the defaults (the variable is set here, or the gate's fuser backend sets it).
Writes DIR/default_config.md (the table) and DIR/default_config.json (every process's numbers) after
every process, so a run stopped early keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from perfgate.backends import BACKENDS
from perfgate.machine import REPOSITORY, commit
from perfgate.workloads import WORKLOADS

OPT_IN = "FUSER_UNVALIDATED"
FUSED = "fuser, opted in"  # the fuser with FUSER_UNVALIDATED=fuse: its launches, for comparison
# label -> (backend, extra environment)
VARIANTS = {
    "eager": ("eager", {}),
    "inductor": ("inductor", {}),
    "fuser": ("fuser", {}),
    FUSED: ("fuser", {OPT_IN: "fuse"}),
}


def backend_opts_in() -> bool:
    """Whether compiling with the gate's fuser backend sets the opt-in in its process (perf gate's
    compile_with_fuser did until issue 27): its "default" numbers would then be the opt-in's."""
    saved = os.environ.pop(OPT_IN, None)
    try:
        BACKENDS["fuser"].compile(lambda x: x)
        return OPT_IN in os.environ
    finally:
        os.environ.pop(OPT_IN, None)
        if saved is not None:
            os.environ[OPT_IN] = saved


def measure(label: str, tier: str, workloads: list[str], scratch: Path) -> tuple[dict, dict[str, str], str]:
    """One fresh process of the gate's worker for `label`: workload -> metric -> repetitions, the
    workloads that failed (-> error), and the device. A failing workload is dropped and the process run
    again without it."""
    backend, extra = VARIANTS[label]
    env = {k: v for k, v in os.environ.items() if k != OPT_IN} | extra | {"PYTHONHASHSEED": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))
    failed: dict[str, str] = {}
    pending = list(workloads)
    while pending:
        spec, record = scratch / "spec.json", scratch / "record.json"
        record.unlink(missing_ok=True)
        spec.write_text(
            json.dumps({"tier": tier, "backend": backend, "instructions": False, "workloads": pending})
        )
        done = subprocess.run(
            [sys.executable, "-m", "perfgate.worker", str(spec), str(record)],
            cwd=REPOSITORY,
            env=env,
            capture_output=True,
            text=True,
        )
        if not record.exists():
            last = (done.stdout + done.stderr).strip().splitlines() or ["no output"]
            raise RuntimeError(f"{label}: the measuring process exited {done.returncode}: {last[-1]}")
        data = json.loads(record.read_text())
        if "failed" not in data:
            return data["measurements"], failed, data["machine"]["device"]
        failed[data["failed"]["workload"]] = data["failed"]["error"].splitlines()[0]
        pending.remove(data["failed"]["workload"])
        print(f"  {label}: {data['failed']['error'].splitlines()[0]}; measuring the others again", flush=True)
    return {}, failed, ""


def schedule(seed: int, rounds: int) -> list[str]:
    """The variants' processes in order: rounds of eager, Inductor and the fuser, the first round's order
    drawn from the seed and each round reversing the one before; then one opted-in fuser process (it
    gives launches, which do not vary between processes)."""
    order = random.Random(seed).sample([label for label in VARIANTS if label != FUSED], len(VARIANTS) - 1)
    labels = []
    for _ in range(rounds):
        labels += order
        order = order[::-1]
    return [*labels, FUSED]


def median_of_processes(processes: list[dict], workload: str, metric: str) -> float | None:
    """The median over processes of each process's median (None where nothing was measured)."""
    medians = [
        statistics.median(p[workload][metric]) for p in processes if (p.get(workload) or {}).get(metric)
    ]
    return statistics.median(medians) if medians else None


def launches(processes: list[dict], workload: str) -> int | str | None:
    """The launches of a warm call: one number where every process agrees, else each process's."""
    counts = sorted(
        {
            v
            for p in processes
            if (p.get(workload) or {}).get("kernel_launches")
            for v in p[workload]["kernel_launches"]
        }
    )
    return None if not counts else counts[0] if len(counts) == 1 else "/".join(map(str, counts))


def summary(results: dict) -> dict:
    """Per workload: each variant's median kernel time and launches, the ratios, default == opted in."""
    rows = {}
    for workload in results["workloads"]:
        processes = {label: results["processes"][label] for label in VARIANTS}
        row = {
            "kernel_time_ms": {
                label: median_of_processes(p, workload, "kernel_time_ms") for label, p in processes.items()
            },
            "kernel_launches": {label: launches(p, workload) for label, p in processes.items()},
            "failed": {
                label: errors[workload] for label, errors in results["failed"].items() if workload in errors
            },
        }
        times = row["kernel_time_ms"]
        for reference in ("inductor", "eager"):
            ok = times["fuser"] is not None and times[reference]
            row[f"fuser/{reference}"] = times["fuser"] / times[reference] if ok else None
        counts = row["kernel_launches"]
        row["default_launches_as_opted_in"] = (
            None if counts["fuser"] is None or counts[FUSED] is None else counts["fuser"] == counts[FUSED]
        )
        rows[workload] = row
    return rows


def markdown(results: dict, rows: dict) -> str:
    def ms(value):
        return "—" if value is None else f"{value:.4g}"

    def ratio(value):
        return "—" if value is None else f"{value:.2f}×"

    def count(value):
        return "—" if value is None else str(value)

    header = (
        "workload",
        "eager ms",
        "inductor ms",
        "fuser ms",
        "fuser / inductor",
        "fuser / eager",
        "launches: eager",
        "inductor",
        "fuser",
        "fuser, opted in",
    )
    body = []
    for workload, row in rows.items():
        times, counts = row["kernel_time_ms"], row["kernel_launches"]
        same = {True: "", False: " ≠", None: ""}[row["default_launches_as_opted_in"]]
        body.append(
            (
                workload,
                *(ms(times[label]) for label in ("eager", "inductor", "fuser")),
                ratio(row["fuser/inductor"]),
                ratio(row["fuser/eager"]),
                *(count(counts[label]) for label in ("eager", "inductor")),
                count(counts["fuser"]) + same,
                count(counts[FUSED]),
            )
        )
    lines = [
        f"# Default configuration: eager, Inductor and the fuser ({results['device']})",
        "",
        f"{results['date']}, commit {results['commit'][:12]}, tier {results['tier']}; torch {results['torch']}; "
        f"{OPT_IN} unset (the fuser's defaults) except in the last column's processes. Kernel time: the "
        f"median of {results['rounds']} fresh processes' medians per variant (rounds alternate, seed "
        f"{results['seed']}); launches per warm call (the fuser: its kernels plus the aten calls it left eager).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(" --- " if i == 0 else " ---: " for i in range(len(header))) + "|",
        *("| " + " | ".join(cells) + " |" for cells in body),
        "",
    ]
    differ = [w for w, row in rows.items() if row["default_launches_as_opted_in"] is False]
    lines.append(
        f"**The fuser's default launches differ from the opted-in ones** (≠) on {', '.join(differ)}: "
        "an op there runs eagerly by default (its manifest entry is missing or stale)."
        if differ
        else "The fuser launches as many kernels by default as opted in on every workload measured."
    )
    for workload, row in rows.items():
        for label, error in row["failed"].items():
            lines.append(f"- {workload} failed under {label}: {error}")
    return "\n".join(lines) + "\n"


def write(out: Path, results: dict) -> dict:
    rows = summary(results)
    (out / "default_config.json").write_text(json.dumps(results | {"summary": rows}, indent=1) + "\n")
    (out / "default_config.md").write_text(markdown(results, rows))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tier", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per variant (rounds)")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS), help="default: all")
    parser.add_argument("--seed", type=int, help="the first round's order (default: drawn, and printed)")
    args = parser.parse_args(argv)
    if os.environ.get(OPT_IN):
        print(f"default_config: {OPT_IN}={os.environ[OPT_IN]} is set here: unset it to measure the defaults")
        return 2
    if backend_opts_in():
        print(
            "default_config: the perf gate's fuser backend sets FUSER_UNVALIDATED=fuse "
            "(perfgate/backends.py): its default numbers would be the opt-in's; drop that first (issue 27)"
        )
        return 2
    seed = random.SystemRandom().randrange(2**31) if args.seed is None else args.seed
    workloads = args.workload or list(WORKLOADS)
    results = {
        "device": None,  # as the measuring processes name it
        "tier": args.tier,
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "commit": commit()["id"],
        "seed": seed,
        "rounds": args.processes,
        "workloads": workloads,
        "order": [],
        "processes": {label: [] for label in VARIANTS},
        "failed": {label: {} for label in VARIANTS},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="default-config-") as scratch:
        for label in schedule(seed, args.processes):
            started = time.monotonic()
            measured, failed, device = measure(label, args.tier, workloads, Path(scratch))
            results["device"] = results["device"] or device
            results["order"].append(label)
            results["processes"][label].append(measured)
            results["failed"][label] |= failed
            write(args.out, results)
            print(f"{label}: {len(measured)} workload(s) in {time.monotonic() - started:.0f} s", flush=True)
    rows = write(args.out, results)
    print((args.out / "default_config.md").read_text())
    return 1 if any(row["default_launches_as_opted_in"] is False for row in rows.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
