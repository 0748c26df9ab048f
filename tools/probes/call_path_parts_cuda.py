"""Where the fuser's share of a small call goes on a GPU host (issue 29 item 3): the perf gate's
`pointwise_chain` on 1,024 fp32 elements (one kernel), each part of its compiled graph's call timed alone
in one process, and a cProfile of the graph's calls.

    python tools/probes/call_path_parts_cuda.py --out DIR

Prints µs per call for each part (the median of five loops of 2,000 calls); DIR/profile.txt holds the
profile. Parts: the compiled graph's whole call; the same with the kernel's launch a no-op (the runtime
alone); the step's launcher called alone; the compiled kernel's own launcher (`CompiledKernel.run`)
called directly with the stream looked up once; an output's allocation; the current device and stream
lookups.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from pathlib import Path


def per_call_us(call, calls: int = 2000) -> float:
    import torch

    for _ in range(100):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    from fuser.runtime.graph import CompiledGraph
    from perfgate.workloads import pointwise_chain

    made: list = []
    original_init = CompiledGraph.__init__

    def keep(self, *a, **k):
        original_init(self, *a, **k)
        made.append(self)

    CompiledGraph.__init__ = keep
    x, y = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    compiled = torch.compile(pointwise_chain, backend="fuser")
    compiled(x, y)
    CompiledGraph.__init__ = original_init
    (graph,) = made
    (step,) = graph.steps
    (launch,) = step.launches.values()
    (stage,) = launch.stages
    launcher = stage.launcher
    outputs = [torch.empty(1024, device="cuda")]
    env = [x, y] + [None] * (len(graph.slots) - 2)
    stage_args = stage.arguments(env, outputs, [])
    parts: dict[str, float] = {}
    parts["whole compiled call (Dynamo, AOTAutograd, fuser)"] = per_call_us(lambda: compiled(x, y))
    parts["compiled graph call"] = per_call_us(lambda: graph([x, y]))
    parts["step launcher alone"] = per_call_us(lambda: launcher(*stage_args))
    kernel = next(iter(launcher.compiled.values()), None)
    # A launcher that keeps Triton's runner closure (`CompiledKernel[grid]`): the kernel is in its cells.
    for cell in getattr(kernel, "__closure__", None) or ():
        if hasattr(cell.cell_contents, "packed_metadata"):
            kernel = cell.cell_contents
    if hasattr(kernel, "packed_metadata"):
        stream = torch._C._cuda_getCurrentRawStream(0)
        grid = launcher.grid3
        full = [*stage_args, *launcher.constexprs]
        parts["CompiledKernel.run, stream looked up once"] = per_call_us(
            lambda: kernel.run(
                *grid, stream, kernel.function, kernel.packed_metadata, None, None, None, *full
            )
        )
    parts["torch.empty_strided (1024 fp32)"] = per_call_us(
        lambda: torch.empty_strided((1024,), (1,), device="cuda")
    )
    parts["torch.cuda.current_device()"] = per_call_us(torch.cuda.current_device)
    parts["_cuda_getCurrentRawStream(0)"] = per_call_us(lambda: torch._C._cuda_getCurrentRawStream(0))
    stage.launcher = lambda *a: None
    parts["compiled graph call, launch a no-op"] = per_call_us(lambda: graph([x, y]))
    stage.launcher = launcher
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20000):
        graph([x, y])
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
    (args.out / "profile.txt").write_text(text.getvalue())
    width = max(map(len, parts))
    for name, us in parts.items():
        print(f"{name:<{width}}  {us:7.2f} µs")


if __name__ == "__main__":
    main()
