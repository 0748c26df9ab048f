"""Why does a workload's kernel time vary between processes of one tree? (adam_step on a lent H100:
2.63-3.37 ms from one process to the next, 0.5% within one.) GPU only; each process is fresh:

    python -m perfgate.spread --workload adam_step --processes 4 --out DIR

Each process compiles the workload as the gate does, then measures, in this order:

- `gate_ms`: kernel time as the gate measures it (CUDA events per rep, L2 flushed before each);
- `no_flush_ms`: the same without the flush (what the L2 flush adds);
- `enqueue_ms`: host wall time to issue one call, no synchronize (how long the launches take to queue);
- `device_ms`: events around a call issued while the stream is held by a sleep kernel longer than
  `enqueue_ms`, so every launch is queued before the first runs: device time without launch gaps;
- `kernels_ms`: the sum of the call's CUDA kernel durations under the profiler, and their count;
- the SM clock, temperature and throttle reasons before and after (nvidia-smi), and where the inputs
  lie (the allocator's segments, the span of their addresses).

Odd processes allocate 1 GiB before the inputs (`shifted`), moving them elsewhere in device memory.
Reading the table: if `gate_ms` varies between processes and follows `enqueue_ms` while `device_ms`
stays put, the spread is host launch speed counted as kernel time (the launch gaps); if `device_ms`
varies with the clock or with `shifted`, it is the device (clocks, placement). DIR/spread.json keeps
every process's figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPS = 20
NVIDIA_SMI = "clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active"
COLUMNS = ("gate_ms", "no_flush_ms", "enqueue_ms", "device_ms", "kernels_ms")


def gpu_state() -> str:
    query = ["nvidia-smi", f"--query-gpu={NVIDIA_SMI}", "--format=csv,noheader", "--id=0"]
    return subprocess.run(query, capture_output=True, text=True).stdout.strip()


def measure_one(workload_name: str, shifted: bool) -> dict:
    """The figures of the module docstring, in this process."""
    from perfgate.backends import BACKENDS
    from perfgate.measure import event_times_ms, kernel_time_ms, l2_flush_buffer, launches_per_call
    from perfgate.workloads import WORKLOADS, Step, tensors_in

    before = gpu_state()
    ballast = torch.empty(2**30 if shifted else 0, dtype=torch.uint8, device="cuda")
    workload = WORKLOADS[workload_name]
    inputs = workload.inputs("gpu", "cuda")
    step = Step(workload, BACKENDS["fuser"].compile(workload.program), inputs)
    step()
    flush = l2_flush_buffer("cuda")
    gate = kernel_time_ms(step, flush).median
    no_flush = event_times_ms(step, REPS, before_each=None).median
    enqueue = []
    for _ in range(REPS):
        torch.cuda.synchronize()
        started = time.perf_counter()
        step()
        enqueue.append((time.perf_counter() - started) * 1e3)
    enqueue_ms = statistics.median(enqueue)
    hold_cycles = int(4 * enqueue_ms * 1e-3 * 2e9)  # about 4x the enqueue time (cycles at up to 2 GHz)
    held = []
    for _ in range(REPS):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(hold_cycles)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        held.append(start.elapsed_time(end))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        step()
        torch.cuda.synchronize()
    kernels = [e for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    pointers = [t.data_ptr() for t in tensors_in(inputs)]
    del ballast  # held until here: the inputs stay where the ballast pushed them
    return {
        "shifted": shifted,
        "gate_ms": gate,
        "no_flush_ms": no_flush,
        "enqueue_ms": enqueue_ms,
        "device_ms": statistics.median(held),
        "kernels_ms": sum(e.device_time for e in kernels) / 1e3,
        "kernels": len(kernels),
        "launches_per_call": launches_per_call(step, BACKENDS["fuser"], "cuda").median,
        "segments": torch.cuda.memory_stats().get("segment.all.current"),
        "input_span_mb": (max(pointers) - min(pointers)) / 2**20,
        "gpu_before": before,
        "gpu_after": gpu_state(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", default="adam_step")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # inside a measuring process
    parser.add_argument("--shifted", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        args.one.write_text(json.dumps(measure_one(args.workload, args.shifted)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    records = []
    for number in range(args.processes):
        path = args.out / f"process-{number}.json"
        shifted = ["--shifted"] if number % 2 else []
        command = [
            sys.executable,
            "-m",
            "perfgate.spread",
            "--workload",
            args.workload,
            "--out",
            str(args.out),
        ]
        subprocess.run([*command, "--one", str(path), *shifted], check=True)
        records.append(json.loads(path.read_text()))
        path.unlink()
        row = "  ".join(f"{c} {records[-1][c]:.3f}" for c in COLUMNS)
        print(
            f"process {number} ({'shifted' if shifted else 'plain'}): {row}  kernels {records[-1]['kernels']}",
            flush=True,
        )
    spreads = {c: max(r[c] for r in records) / min(r[c] for r in records) - 1 for c in COLUMNS}
    print("spread between processes (max/min - 1): " + ", ".join(f"{c} {s:.1%}" for c, s in spreads.items()))
    (args.out / "spread.json").write_text(
        json.dumps({"processes": records, "spreads": spreads}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
