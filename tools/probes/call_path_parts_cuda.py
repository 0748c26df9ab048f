"""Where the fuser's share of a small call goes on a GPU host (issue 29 item 3): the perf gate's
`pointwise_chain` on 1,024 fp32 elements (one kernel), each part of its compiled graph's call timed alone
in one process, and a cProfile of the graph's calls.

    python tools/probes/call_path_parts_cuda.py --out DIR [--device cpu]

On the CPU (`--device cpu`) only the runtime's parts are measured: its kernels run in Triton's
interpreter, so the launch and the whole call are not a GPU's.

Prints µs per call for each part (the median of five loops of 2,000 calls); DIR/profile.txt holds the
profile. Parts: the compiled graph's whole call; the same with the kernel's launch a no-op (the runtime
alone); the step's launcher called alone; the compiled kernel's own launcher (`CompiledKernel.run`)
called directly with the stream looked up once; an output's allocation; the current device and stream
lookups. The parts are the general loop's (`options={"call_function": False}`), which a call took
before session 34; benchmarks/call_path.py splits the call written out since then.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # benchmarks/call_path.py


def per_call_us(call, calls: int = 2000) -> float:
    """µs per call as benchmarks/call_path.py times it (the median of five loops after a warm-up)."""
    import torch
    from call_path import _per_call_us

    return _per_call_us(call, calls, torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None))


def _cuda_parts(parts: dict[str, float], launcher, stage_args: list) -> None:
    """The launch's own parts: Triton's launcher called directly, and the device and stream lookups."""
    import torch

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
    parts["torch.cuda.current_device()"] = per_call_us(torch.cuda.current_device)
    parts["_cuda_getCurrentRawStream(0)"] = per_call_us(lambda: torch._C._cuda_getCurrentRawStream(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
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
    device = args.device
    x, y = torch.randn(1024, device=device), torch.randn(1024, device=device)
    options = {"unvalidated": "fuse"} if device == "cpu" else {}  # the chain's ops as on the GPU: fused
    options["call_function"] = False  # the general loop's parts (the written call: benchmarks/call_path.py)
    compiled = torch.compile(pointwise_chain, backend="fuser", options=options)
    compiled(x, y)
    CompiledGraph.__init__ = original_init
    (graph,) = made
    (step,) = graph.steps
    (launch,) = step.launches.values()
    (stage,) = launch.stages
    launcher = stage.launcher
    outputs = [torch.empty(1024, device=device)]
    env = [x, y] + [None] * (len(graph.slots) - 2)
    stage_args = stage.arguments(env, outputs, [])
    parts: dict[str, float] = {}
    if device == "cuda":
        parts["whole compiled call (Dynamo, AOTAutograd, fuser)"] = per_call_us(lambda: compiled(x, y))
        parts["compiled graph call"] = per_call_us(lambda: graph([x, y]))
        parts["step launcher alone"] = per_call_us(lambda: launcher(*stage_args))
        _cuda_parts(parts, launcher, stage_args)
    parts["torch.empty_strided (1024 fp32)"] = per_call_us(
        lambda: torch.empty_strided((1024,), (1,), device=device)
    )
    parts["the step's allocator (1024 fp32)"] = per_call_us(
        lambda: step.allocate((1024,), (1,), torch.float32)
    )
    stage.launcher = lambda *a: None
    parts["compiled graph call, launch a no-op"] = per_call_us(lambda: graph([x, y]))
    if device == "cuda":  # the CPU's launch is the interpreter's: its profile is of the runtime alone
        stage.launcher = launcher
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20000):
        graph([x, y])
    if device == "cuda":
        torch.cuda.synchronize()
    profiler.disable()
    stage.launcher = launcher
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
    (args.out / "profile.txt").write_text(text.getvalue())
    width = max(map(len, parts))
    for name, us in parts.items():
        print(f"{name:<{width}}  {us:7.2f} µs")


if __name__ == "__main__":
    main()
