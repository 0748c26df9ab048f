"""Median and range of benchmarks/optimizer_step.py's figures over several runs (fresh processes).

    python tools/optim_medians.py OUT/bench/run1 OUT/bench/run2 OUT/bench/run3

Each directory holds one run's optimizer-step-cuda.json (or -cpu.json). Prints, per optimizer and
variant, the median ms per step with its range, the kernels per step, the copy-rate fraction of the
median and how many runs had the variant: issue 13's "median of at least three runs" from one command.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def load(directory: Path) -> dict:
    (path,) = sorted(directory.glob("optimizer-step-*.json")) or [None]
    if path is None:
        raise SystemExit(f"optim_medians: no optimizer-step-*.json in {directory}")
    return json.loads(path.read_text())


def main(directories: list[str]) -> int:
    if not directories:
        raise SystemExit(__doc__)
    rows = defaultdict(list)  # (optimizer, variant) -> that variant's row of each run
    for directory in directories:
        for kind, results in load(Path(directory))["results"].items():
            for row in results:
                rows[kind, row["variant"]].append(row)
    print(f"{len(directories)} runs")
    print(
        "| optimizer | variant | ms per step: median (min-max) | kernel ms median | kernels | copy rate % of median | runs |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (kind, variant), runs in rows.items():
        ms = [r["ms_per_step"] for r in runs]
        kernel_ms = [r["kernel_ms_per_step"] for r in runs if r.get("kernel_ms_per_step") is not None]
        median = statistics.median(ms)
        # copy_rate_fraction = fewest bytes / time / copy rate: scale one run's to the median time
        fractions = [
            r["copy_rate_fraction"] * r["ms_per_step"] / median for r in runs if r["copy_rate_fraction"]
        ]
        rate = f"{100 * statistics.median(fractions):.0f}" if fractions else "-"
        kernels = sorted({r["kernels_per_step"] for r in runs})
        kernel_median = f"{statistics.median(kernel_ms):.3f}" if kernel_ms else "-"
        print(
            f"| {kind} | {variant} | {median:.3f} ({min(ms):.3f}-{max(ms):.3f}) | {kernel_median} "
            f"| {'/'.join(map(str, kernels))} | {rate} | {len(runs)} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
