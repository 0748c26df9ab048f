"""The ops the fuser lowers inside the perf gate's workloads: the ops to validate first on a new
architecture (issue 14: "make sure the gate workloads' ops are validated first").

    python tools/workload_ops.py --device cuda --size gpu_tiny     # one op a line, sorted
    python tools/workload_ops.py --device cuda --size gpu_tiny --unvalidated   # those with no fresh entry

Each workload runs once through the fuser with every lowering on (the gate itself runs the defaults),
and the aten ops its kernels cover are collected from `fuser.collecting()`'s reports. With `--json` the
ops come with the workloads that use them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict

import torch

import fuser
from fuser.validate import validation
from perfgate.workloads import SIZES, WORKLOADS, Step

# A kernel's `covers` line: "name = aten.op.overload(args)".
COVERED_OP = re.compile(r"=\s*((?:aten|prims)\.[\w.]+)\(")


def ops_of(workload_name: str, size: str, device: str) -> set[str]:
    workload = WORKLOADS[workload_name]
    inputs = workload.inputs(size, device)
    # Every lowering on (the gate itself runs the defaults): which ops its kernels would cover.
    compiled = fuser.compile(workload.program, dynamic=False, unvalidated="fuse")
    with fuser.collecting() as graphs:
        Step(workload, compiled, inputs)()
    ops = set()
    for graph in graphs:
        for kernel in graph.kernels:
            for line in kernel.covers:
                match = COVERED_OP.search(line)
                if match:
                    ops.add(match.group(1))
    return ops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--size", default="cpu_tiny", choices=SIZES)
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS), help="default: all")
    parser.add_argument("--json", action="store_true", help="ops with the workloads that use them")
    parser.add_argument(
        "--unvalidated", action="store_true", help="only ops the device's manifest has no fresh entry for"
    )
    args = parser.parse_args(argv)
    used_by: dict[str, list[str]] = defaultdict(list)
    for name in args.workload or sorted(WORKLOADS):
        torch._dynamo.reset()
        for op in ops_of(name, args.size, args.device):
            used_by[op].append(name)
    if not used_by:
        print("workload_ops: the fuser made no kernel for these workloads", file=sys.stderr)
        return 1
    if args.unvalidated:
        manifest = validation.load(validation.arch_of(torch.device(args.device)))
        entries = manifest.entries if manifest else {}
        used_by = {op: w for op, w in used_by.items() if op not in entries or not entries[op].fresh}
    if args.json:
        print(json.dumps(dict(sorted(used_by.items())), indent=1))
    else:
        print("\n".join(sorted(used_by)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
