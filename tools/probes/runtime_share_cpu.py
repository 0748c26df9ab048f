"""The fuser's own runtime share of a small call, launches excluded, measured on a CPU (issue 29 item 3).

    python tools/probes/runtime_share_cpu.py [--profile]

Compiles the perf gate's `pointwise_chain` (one kernel) on 1,024 float32 elements, replaces each launch
with a no-op after the first call, and times the compiled graph called with a list of inputs: what the
fuser's runtime does around a launch (the graph's loop, the step's fallback and contiguity checks, output
allocation, argument filling). A proxy for the GPU's `fuser_runtime` share in benchmarks/call_path.py,
which only a GPU measures with its real allocator and launcher.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import torch

import fuser  # noqa: F401  (registers the backend)
from fuser.runtime.graph import CompiledGraph
from perfgate.workloads import pointwise_chain


def per_call_us(call, calls: int = 20000) -> float:
    for _ in range(500):
        call()
    samples = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="also print the top of a cProfile")
    args = parser.parse_args()
    made = []
    original_init = CompiledGraph.__init__

    def keep(self, *a, **k):
        original_init(self, *a, **k)
        made.append(self)

    CompiledGraph.__init__ = keep
    try:
        inputs = [torch.randn(1024), torch.randn(1024)]
        compiled = torch.compile(pointwise_chain, backend="fuser", options={"unvalidated": "fuse"})
        compiled(*inputs)
    finally:
        CompiledGraph.__init__ = original_init
    (graph,) = made
    for step in graph.steps:
        for launch in step.launches.values():
            for stage in launch.stages:
                stage.launcher = lambda *_: None
    print(f"steps: {[type(s).__name__ for s in graph.steps]}")
    print(f"runtime share, launches excluded: {per_call_us(lambda: graph(list(inputs))):.2f} us a call")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [graph(list(inputs)) for _ in range(20000)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(10)


if __name__ == "__main__":
    main()
