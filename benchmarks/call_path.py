"""Host time of one compiled call, and where the fuser's goes (issue 29 item 3).

    python benchmarks/call_path.py --device cuda --repeats 3 --json call_path.json

The workload is the perf gate's `pointwise_chain` (ten pointwise ops) on 1,024 fp32 elements: its kernel
takes a few microseconds, so a loop of calls measures the host. Each variant runs in a fresh process,
the variants in a new random order each repeat; each process times `--calls` calls (after a warm-up) five
times and reports the median of those. Variants:

- `eager`; `inductor` (the default backend) and `inductor-ro` (its reduce-overhead mode: CUDA graphs);
- `fuser`, with the shares of its call measured in the same process by calling each layer directly:
  `dynamo` (the whole call less AOTAutograd's callable called without Dynamo), `aot` (that callable less
  the fuser's compiled graph called with a list), `fuser_runtime` (the compiled graph with its launches
  made no-ops: the fuser's own share) and `launch` (the rest: torch's C launcher and the driver);
- `fuser-loop`: `fuser` with every call through the general loop over the steps rather than the call
  written out for the graph (`FUSER_CALL_FUNCTION=0`); its `launch` share is each launcher's call timed
  one by one (the specialization key it computes included);
- `fuser-triton-launcher`: `fuser` with each kernel launched through Triton's own C launcher rather than
  torch's static one (`FUSER_STATIC_LAUNCH=0`); `fuser-static-run`: through torch's static launcher's
  Python `run` rather than its C entry point called directly (`FUSER_STATIC_LAUNCH=run`);
- `fuser-graphs`: the fuser replaying CUDA graphs of any graph (`options={"cuda_graphs": True}`);
- `replay`: a CUDA graph of eager's ops, replayed by hand (the floor a call path could reach; CUDA only).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

from fresh_process import measure

VARIANTS = (
    "eager",
    "inductor",
    "inductor-ro",
    "fuser",
    "fuser-loop",
    "fuser-triton-launcher",
    "fuser-static-run",
    "fuser-graphs",
    "replay",
)
ENVIRONMENTS = {
    "fuser-loop": {"FUSER_CALL_FUNCTION": "0"},
    "fuser-triton-launcher": {"FUSER_STATIC_LAUNCH": "0"},
    "fuser-static-run": {"FUSER_STATIC_LAUNCH": "run"},
}


def _per_call_us(call, calls: int, sync) -> float:
    for _ in range(50):
        call()
    sync()
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def one(variant: str, device: str, calls: int) -> dict:
    import torch

    from perfgate.workloads import pointwise_chain

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    x, y = torch.randn(1024, device=device), torch.randn(1024, device=device)
    result: dict = {"variant": variant}
    if variant == "eager":
        result["us"] = _per_call_us(lambda: pointwise_chain(x, y), calls, sync)
    elif variant in ("inductor", "inductor-ro"):
        mode = "reduce-overhead" if variant == "inductor-ro" else None
        compiled = torch.compile(pointwise_chain, backend="inductor", mode=mode)
        result["us"] = _per_call_us(lambda: compiled(x, y), calls, sync)
    elif variant == "replay":
        graph = torch.cuda.CUDAGraph()
        pointwise_chain(x, y)
        sync()
        with torch.cuda.graph(graph):
            pointwise_chain(x, y)
        result["us"] = _per_call_us(graph.replay, calls, sync)
    elif variant == "fuser-graphs":
        compiled = torch.compile(pointwise_chain, backend="fuser", options={"cuda_graphs": True})
        result["us"] = _per_call_us(lambda: compiled(x, y), calls, sync)
    else:
        result |= _fuser_shares(pointwise_chain, (x, y), calls, sync)
    return result


def _fuser_shares(fn, inputs, calls: int, sync) -> dict:
    """The fuser's whole call and each layer's share, layers called directly (module docstring)."""
    import torch

    from fuser.capture.backend import fuser_backend
    from fuser.runtime.graph import CompiledGraph

    made: list = []  # AOTAutograd's callable (what Dynamo calls) and the fuser's compiled graph
    original_init = CompiledGraph.__init__

    def keep(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        made.append(self)

    CompiledGraph.__init__ = keep
    try:

        def backend(graph_module, example_inputs):
            made.append(aot := fuser_backend(graph_module, example_inputs))
            return aot

        compiled = torch.compile(fn, backend=backend)
        compiled(*inputs)
    finally:
        CompiledGraph.__init__ = original_init
    (graph,) = [m for m in made if isinstance(m, CompiledGraph)]
    (aot,) = [m for m in made if not isinstance(m, CompiledGraph)]
    whole = _per_call_us(lambda: compiled(*inputs), calls, sync)
    through_aot = _per_call_us(lambda: aot(*inputs), calls, sync)
    runtime = _per_call_us(lambda: graph(list(inputs)), calls, sync)
    if graph.call is not None:  # the written-out call: its launches are calls of torch's C entry point
        runtime_only = _without_launches(graph, inputs, calls, sync)
        launch = runtime - runtime_only
    else:
        launch, runtime_only = _launches_timed(graph, inputs, runtime, calls, sync)
    return {
        "us": whole,
        "dynamo": whole - through_aot,
        "aot": through_aot - runtime,
        "fuser_runtime": runtime_only,
        "launch": launch,
    }


def _without_launches(graph, inputs, calls: int, sync) -> float:
    """The written-out call timed with each launch it writes out (torch's C entry point) made a no-op."""
    names = graph.call.__globals__
    entries = {name: value for name, value in names.items() if name.startswith("launch_kernel")}
    names.update(dict.fromkeys(entries, lambda *args: None))
    try:
        return _per_call_us(lambda: graph(list(inputs)), calls, sync)
    finally:
        names.update(entries)


def _launches_timed(graph, inputs, runtime: float, calls: int, sync) -> tuple[float, float]:
    """The general loop's launches (`DirectLauncher.__call__`, its specialization key included), timed
    one by one, and the rest of its call (`runtime`, the call's untimed time, less them)."""
    from fuser.runtime.direct_launch import DirectLauncher

    launched = [0.0]
    original_call = DirectLauncher.__call__

    def timed(self, *args):
        started = time.perf_counter()
        original_call(self, *args)
        launched[0] += time.perf_counter() - started

    DirectLauncher.__call__ = timed
    try:
        timed_runtime = _per_call_us(lambda: graph(list(inputs)), calls, sync)
    finally:
        DirectLauncher.__call__ = original_call
    launch = launched[0] / (calls * 5 + 50) * 1e6
    # The timer's own cost lands in the launch share: runtime's share is the untimed run less launches.
    return launch, runtime - min(launch, timed_runtime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.device, args.calls)))
        return
    order, runs = random.Random(args.seed), []
    for repeat in range(args.repeats):
        for variant in order.sample(args.variants, len(args.variants)):
            arguments = ["--device", args.device, "--calls", str(args.calls), "--one", variant]
            env = os.environ | ENVIRONMENTS.get(variant, {})
            run = measure(__file__, arguments, variant, env) | {"repeat": repeat}
            print(json.dumps(run), flush=True)
            runs.append(run)
    print("\n| variant | µs per call, median of processes (min–max) | shares (medians) |\n|---|---|---|")
    for variant in args.variants:
        mine = [r for r in runs if r["variant"] == variant]
        us = [r["us"] for r in mine]
        shares = ", ".join(
            f"{k} {statistics.median(r[k] for r in mine):.1f}"
            for k in ("dynamo", "aot", "fuser_runtime", "launch")
            if k in mine[0]
        )
        print(f"| {variant} | {statistics.median(us):.1f} ({min(us):.1f}–{max(us):.1f}) | {shares} |")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
