"""Which yardstick keeps a training workload's host_relative steady between processes (issue 30)?
The gate divides a warm call's host time by an eager tiny `torch.add`'s, timed in the next batch. A
training step also hands work to autograd's device thread and waits for it; how long that wake-up
takes depends on where the two threads run (tools/probes/host_pinning_cuda.py: add_layer_norm_backward
at 290-860 us a call between processes, where bias_gelu's forward moved far less). Here each batch of
the workload's tiny step is followed by a batch of each yardstick: `add` (the gate's) and `add_grad`
(the same add and `torch.autograd.grad` of it, through the same engine):

    python tools/probes/host_yardstick_cuda.py --processes 8 --out DIR add_layer_norm_backward

Fresh processes, pinned to the last two CPUs (as the gate pinned them when this was measured) unless
--unpinned; prints each
yardstick's process-to-process spread; DIR/yardsticks.json keeps every batch.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BATCHES, CALLS = 15, 60


def measure(workload_name: str) -> dict:
    from perfgate.backends import BACKENDS
    from perfgate.measure import _per_call_us, prepare_on_gpu, reference_call
    from perfgate.workloads import WORKLOADS

    step = prepare_on_gpu(WORKLOADS[workload_name], BACKENDS["fuser"]).tiny_step
    # the gate's own yardsticks: the eager add, and the add with its gradient
    yardsticks = {"add": reference_call("cuda"), "add_grad": reference_call("cuda", training=True)}
    for _ in range(10):
        step()
        for call in yardsticks.values():
            call()
    rows = {"step": [], **{name: [] for name in yardsticks}}
    gc.collect()
    gc.disable()
    for _ in range(BATCHES):
        rows["step"].append(_per_call_us(step, CALLS))
        for name, call in yardsticks.items():
            rows[name].append(_per_call_us(call, CALLS))
    gc.enable()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workloads", nargs="+")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--unpinned", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # inside a measuring process: WORKLOAD:PATH
    args = parser.parse_args()
    if args.one:
        workload, path = args.one.split(":", 1)
        Path(path).write_text(json.dumps(measure(workload)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    allowed = sorted(os.sched_getaffinity(0))
    results = {}
    for workload in args.workloads:
        results[workload] = []
        for number in range(args.processes):
            path = args.out / f"{workload}-{number}.json"
            command = [
                sys.executable,
                __file__,
                "--out",
                str(args.out),
                "--one",
                f"{workload}:{path}",
                workload,
            ]
            process = subprocess.Popen(command, env=os.environ | {"PYTHONHASHSEED": "0"})
            if not args.unpinned:
                os.sched_setaffinity(process.pid, set(allowed[-2:]))
            if process.wait():
                raise SystemExit(f"{workload} process {number} failed")
            rows = json.loads(path.read_text())
            path.unlink()
            results[workload].append(rows)
            step = statistics.median(rows["step"])
            print(
                workload,
                f"step {step:.1f} us",
                "  ".join(
                    f"/{name} {statistics.median(s / y for s, y in zip(rows['step'], rows[name], strict=True)):.2f}"
                    for name in rows
                    if name != "step"
                ),
                flush=True,
            )
        (args.out / "yardsticks.json").write_text(json.dumps(results))
        for name in ("step", "add", "add_grad"):
            if name == "step":
                medians = [statistics.median(r["step"]) for r in results[workload]]
            else:
                medians = [
                    statistics.median(s / y for s, y in zip(r["step"], r[name], strict=True))
                    for r in results[workload]
                ]
            print(
                f"  {workload} {name:9} process medians max/min {max(medians) / min(medians):.3f}  "
                f"{[round(m, 2) for m in medians]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
