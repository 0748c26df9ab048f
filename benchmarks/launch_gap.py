"""Where a workload's call time goes beyond its kernels' time, on a GPU, fuser against the default backend.

`compare.py` times a call with `triton.testing.do_bench` (L2 flushed by a memset before each call) and
its kernels with the profiler (calls back to back, no flush). This script reads both situations from a
profiler trace instead, per variant: each kernel's duration right after the flush and back to back, the
gap between the flush's end and the call's first kernel, and the launch shape the trace records (grid,
block, registers, shared memory, occupancy). Then it times the fuser under other launch settings,
interleaved with the default backend so that drift cancels.

    python benchmarks/launch_gap.py --workload add_layer_norm --out DIR \
        [--setting GPU_ROW_ELEMENTS=8192 --setting GPU_ELEMENTS_PER_WARP=256,GPU_ROW_ELEMENTS=8192 ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import triton
import triton.testing
from compare import WORKLOADS, apply_settings, as_call, make_inputs  # benchmarks/ is the script's folder

import fuser
import fuser.runtime.launch_config

FLUSH_BYTES = 256 * 2**20  # what do_bench zeroes between calls
TRACE_FIELDS = ("grid", "block", "registers per thread", "shared memory", "est. achieved occupancy %")


def _kernels(trace_path: Path) -> list[dict]:
    events = json.loads(trace_path.read_text())["traceEvents"]
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def _is_flush(event: dict) -> bool:
    return "fill" in event["name"].lower() or "zero" in event["name"].lower()


def _trace(loop, trace_path: Path) -> list[dict]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        loop()
        torch.cuda.synchronize()
    profile.export_chrome_trace(str(trace_path))
    return _kernels(trace_path)


def profile_variant(call, calls: int, out: Path, name: str) -> dict:
    """Kernel durations and gaps, in µs: one trace of `calls` calls each after a flush, one back to back."""
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    call()
    torch.cuda.synchronize()

    def flushed_loop():
        for _ in range(calls):
            flush.zero_()
            call()

    def warm_loop():
        for _ in range(calls):
            call()

    groups: list[list[dict]] = []
    flush_ends: list[float] = []
    for kernel in _trace(flushed_loop, out / f"trace-{name}-flushed.json"):
        if _is_flush(kernel):
            flush_ends.append(kernel["ts"] + kernel["dur"])
            groups.append([])
        elif groups:
            groups[-1].append(kernel)
    warm = _trace(warm_loop, out / f"trace-{name}-warm.json")
    per_call = len(warm) // calls
    return {
        "kernel_us_after_flush": statistics.median(sum(k["dur"] for k in g) for g in groups),
        "gap_us_after_flush": statistics.median(
            g[0]["ts"] - end for g, end in zip(groups, flush_ends, strict=True) if g
        ),
        "kernel_us_back_to_back": statistics.median(
            sum(k["dur"] for k in warm[i : i + per_call]) for i in range(0, per_call * calls, per_call)
        ),
        "kernels_per_call": per_call,
        "launch_shapes": {k["name"][:80]: {f: k.get("args", {}).get(f) for f in TRACE_FIELDS} for k in warm},
    }


def graph_replay(call):
    """The call captured in a CUDA graph: replaying it launches the same kernels with no host work."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def host_us(call, calls: int = 50) -> float:
    """Host time of one call while the GPU keeps up (synchronized before, queue far from full)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def event_overhead_us(call, calls: int, out: Path, name: str) -> dict:
    """do_bench's own loop (flush, event, call, event) under the profiler: each call's event time less
    its kernels' time, and the period between flushes."""
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)
    ]

    def loop():
        for start, end in events:
            flush.zero_()
            start.record()
            call()
            end.record()

    groups: list[list[dict]] = []
    for kernel in _trace(loop, out / f"trace-{name}-events.json"):
        if _is_flush(kernel):
            groups.append([])
        elif groups:
            groups[-1].append(kernel)
    extra = [
        start.elapsed_time(end) * 1e3 - (g[-1]["ts"] + g[-1]["dur"] - g[0]["ts"])
        for (start, end), g in zip(events, groups, strict=True)
    ]
    return {
        "event_us": statistics.median(s.elapsed_time(e) * 1e3 for s, e in events),
        "event_less_kernels_us": statistics.median(extra),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", default="add_layer_norm", choices=sorted(WORKLOADS))
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=30, help="profiled calls per situation")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds per setting")
    parser.add_argument(
        "--setting", action="append", default=[], help="fuser.runtime.launch_config constants to try"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch._dynamo.config.recompile_limit = 64
    torch.manual_seed(0)
    workload = WORKLOADS[args.workload]
    inputs = make_inputs(workload, {"rows": args.rows, "cols": args.cols}, "cuda")
    programs = {
        "fuser": fuser.compile(workload.program, dynamic=False, strict=True, unvalidated="fuse"),
        "inductor": torch.compile(workload.program, dynamic=False),
    }
    calls = {name: as_call(program, workload, inputs) for name, program in programs.items()}
    results: dict = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    print(f"{results['device']}, torch {torch.__version__}, triton {triton.__version__}, {args.workload}")
    print(f"{'variant':<10}{'after flush us':>16}{'back to back us':>17}{'gap after flush us':>20}")
    for name, call in calls.items():
        found = profile_variant(call, args.calls, args.out, name)
        results[name] = found
        print(
            f"{name:<10}{found['kernel_us_after_flush']:>16.1f}{found['kernel_us_back_to_back']:>17.1f}"
            f"{found['gap_us_after_flush']:>20.1f}"
        )
        found |= event_overhead_us(call, args.calls, args.out, name)
        found["host_us_per_call"] = host_us(call)
        replay = graph_replay(call)
        found["do_bench_ms"] = triton.testing.do_bench(call, warmup=50, rep=300, return_mode="median")
        found["do_bench_graph_replay_ms"] = triton.testing.do_bench(
            replay, warmup=50, rep=300, return_mode="median"
        )
        print(
            f"    events {found['event_us']:.1f} us (kernels + {found['event_less_kernels_us']:.1f}); host "
            f"{found['host_us_per_call']:.1f} us a call; do_bench {found['do_bench_ms']:.4f} ms, "
            f"CUDA graph replay {found['do_bench_graph_replay_ms']:.4f} ms"
        )
        for kernel, shape in found["launch_shapes"].items():
            print(f"    {kernel}: {shape}")
    results["settings"] = {}
    for setting in ["", *args.setting]:
        restore = apply_settings(setting)
        rounds = {"fuser": [], "inductor": []}
        for _ in range(args.repeats):
            for name in rounds:
                rounds[name].append(
                    triton.testing.do_bench(calls[name], warmup=50, rep=300, return_mode="median")
                )
        apply_settings(restore)
        fuser_ms, inductor_ms = statistics.median(rounds["fuser"]), statistics.median(rounds["inductor"])
        results["settings"][setting or "default"] = {
            "fuser_ms": rounds["fuser"],
            "inductor_ms": rounds["inductor"],
        }
        print(
            f"setting {setting or 'default':<50} fuser {fuser_ms:.4f} ms  default backend {inductor_ms:.4f} ms"
            f"  ratio {fuser_ms / inductor_ms:.3f}"
        )
    (args.out / f"launch-gap-{args.workload}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
