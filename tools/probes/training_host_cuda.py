"""Where does a compiled training step's host time go (issue 29 item 2)? On the H100 (session 30) layer
norm's forward + backward took 0.62 ms a call under the fuser against 0.28 ms of its kernels, and about
the same gap under the default backend, while cross-entropy's training call sat 10 µs above its kernels.

For each workload and variant, in this one process:
- the gate's tiny inputs: host µs of the forward alone and of the whole step (forward + `torch.autograd.grad`),
  batches of calls each closed by one synchronize (median of the batches);
- the gate's GPU size: the step's call ms (do_bench, L2 flushed) and its kernels' ms (profiler);
- a torch.profiler trace of three warm steps at the timed size, written to OUT (chrome JSON, gzipped),
  with each call's launch timeline: µs from the call's start to each kernel launch and to its return.

    python tools/probes/training_host_cuda.py --out DIR [--workloads layer_norm_backward ...]

Variants: eager, aot_eager (Dynamo and AOTAutograd with no code generation: the framework's share),
inductor, fuser (everything fused, as benchmarks/compare.py), fuser with CUDA graphs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import time
from pathlib import Path

import torch
import triton

import fuser
from perfgate.workloads import WORKLOADS, Step


def variants() -> dict:
    def fuser_compile(cuda_graphs: bool):
        return lambda program: fuser.compile(
            program, dynamic=False, strict=True, unvalidated="fuse", cuda_graphs=cuda_graphs
        )

    return {
        "eager": lambda program: program,
        "aot_eager": lambda program: torch.compile(program, backend="aot_eager", dynamic=False),
        "inductor": lambda program: torch.compile(program, dynamic=False),
        "fuser": fuser_compile(False),
        "fuser_graphs": fuser_compile(True),
    }


def host_us(call, calls: int = 100, batches: int = 7) -> float:
    for _ in range(5):
        call()
    times = []
    for _ in range(batches):
        torch.cuda.synchronize()
        started = time.perf_counter_ns()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        times.append((time.perf_counter_ns() - started) / calls / 1e3)
    return statistics.median(times)


def enqueue_us(call, calls: int = 30) -> float:
    """The host's own time for one call with the GPU idle at its start: from the call to its return,
    a synchronize between calls (median). Above the kernels' time, the call is host-bound."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        started = time.perf_counter_ns()
        call()
        times.append((time.perf_counter_ns() - started) / 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def whole_step_graph(step: Step):
    """The whole step (forward, `torch.autograd.grad`, backward) captured as one CUDA graph, as a user
    would capture it: its replay runs no framework Python, so its time is what a training call costs
    once the host is out of the way (the bound for item 2's call). Warmed on a side stream first, as
    torch.cuda.graph asks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def step_for(workload, compile_fn, size: dict[str, int]) -> Step:
    torch.manual_seed(0)
    inputs = workload.make_inputs(**size, device="cuda")
    torch._dynamo.reset()
    return Step(workload, compile_fn(workload.program), inputs)


def forward_only(step: Step):
    return lambda: step.compiled(*step.inputs)


def launch_timeline(prof) -> list[dict]:
    """Per profiled step: µs from its start to each kernel launch, and the step's own length."""
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    steps = sorted((e for e in events if e.name.startswith("step")), key=lambda e: e.time_range.start)
    launches = [
        e for e in events if "LaunchKernel" in e.name or "cuLaunch" in e.name or "GraphLaunch" in e.name
    ]
    rows = []
    for s in steps:
        start, end = s.time_range.start, s.time_range.end
        inside = sorted(e.time_range.start for e in launches if start <= e.time_range.start <= end)
        rows.append({"step_us": end - start, "launch_at_us": [t - start for t in inside]})
    return rows


def top_ops(prof, n: int = 25) -> str:
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=n, max_name_column_width=60)


def profile(step: Step, out: Path, name: str) -> dict:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for k in range(3):
            with torch.profiler.record_function(f"step{k}"):
                step()
        torch.cuda.synchronize()
    trace = out / f"{name}.json"
    prof.export_chrome_trace(str(trace))
    with open(trace, "rb") as raw, gzip.open(f"{trace}.gz", "wb") as packed:
        packed.write(raw.read())
    trace.unlink()
    (out / f"{name}.ops.txt").write_text(top_ops(prof))
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {
        "timeline": launch_timeline(prof),
        "kernel_ms_per_step": sum(e.device_time for e in kernels) / 3 / 1e3,
        "kernels_per_step": len(kernels) / 3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--workloads",
        nargs="+",
        default=["layer_norm_backward", "add_layer_norm_backward", "cross_entropy_backward"],
    )
    parser.add_argument("--variants", nargs="+", default=list(variants()))
    parser.add_argument(
        "--step-graph", action="store_true", help="also time the whole step captured as one CUDA graph"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in args.workloads:
        workload = WORKLOADS[name]
        for variant in args.variants:
            compile_fn = variants()[variant]
            tiny = step_for(workload, compile_fn, workload.sizes["gpu_tiny"])
            row = {"tiny_step_us": host_us(tiny), "tiny_forward_us": host_us(forward_only(tiny))}
            big = step_for(workload, compile_fn, workload.sizes["gpu"])
            row["call_ms"] = triton.testing.do_bench(big, warmup=50, rep=300, return_mode="median")
            row["host_step_us"] = enqueue_us(big)
            row["tiny_step_us_again"] = host_us(tiny)
            if args.step_graph:
                try:
                    replay = whole_step_graph(big)
                    row["step_graph_ms"] = triton.testing.do_bench(
                        replay, warmup=50, rep=300, return_mode="median"
                    )
                except Exception as error:  # a backend whose step cannot be captured: say why
                    row["step_graph_error"] = f"{type(error).__name__}: {error}"[:300]
                print(
                    f"{name:26} {variant:13} whole step as one CUDA graph: "
                    f"{row.get('step_graph_ms', row.get('step_graph_error'))}",
                    flush=True,
                )
            row.update(profile(big, args.out, f"{name}-{variant}"))
            results[f"{name}/{variant}"] = row
            steps = row["timeline"]
            print(
                f"{name:26} {variant:13} tiny step {row['tiny_step_us']:8.1f} us  fwd {row['tiny_forward_us']:7.1f} us"
                f" (again {row['tiny_step_us_again']:.1f})  host step {row['host_step_us']:.0f} us  call {row['call_ms']:.4f} ms  kernels {row['kernel_ms_per_step']:.4f} ms"
                f" ({row['kernels_per_step']:.0f})  profiled step {statistics.median(s['step_us'] for s in steps):.0f} us"
                f"  launches at {[round(t) for t in steps[-1]['launch_at_us']]}",
                flush=True,
            )
            (args.out / "training_host.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
