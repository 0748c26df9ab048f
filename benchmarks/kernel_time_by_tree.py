"""A perf-gate workload's kernel time under several copies of the fuser, to bisect a regression.

Each TREE is a folder holding a `fuser/` package (e.g. `git archive COMMIT fuser | tar -x -C TREE`);
each is timed in a process of its own with TREE first on PYTHONPATH, the perf gate's way (CUDA events,
L2 flushed), the trees alternating for --rounds rounds so that a drift of the machine shows in all.

    python benchmarks/kernel_time_by_tree.py --workload adam_step --rounds 2 TREE [TREE ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

ONE_TIMING = """
import sys, fuser, perfgate.measure as m
from perfgate.backends import BACKENDS
from perfgate.workloads import WORKLOADS
assert fuser.__file__.startswith(sys.argv[2]), fuser.__file__
prepared = m.prepare_on_gpu(WORKLOADS[sys.argv[1]], BACKENDS["fuser"])
print(m.kernel_time_ms(prepared.step, m.l2_flush_buffer("cuda")).median)
"""


def time_tree(tree: str, workload: str) -> float:
    tree = os.path.abspath(tree)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-c", ONE_TIMING, workload, tree],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("trees", nargs="+")
    args = parser.parse_args()
    times: dict[str, list[float]] = {tree: [] for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            times[tree].append(time_tree(tree, args.workload))
    for tree, rounds in times.items():
        print(
            f"{args.workload} {tree:<40} {statistics.median(rounds):.4f} ms  (rounds {[round(t, 4) for t in rounds]})"
        )


if __name__ == "__main__":
    main()
