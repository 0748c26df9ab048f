"""Measurements of one workload on one backend: GPU timings and counts, and the CPU tier's counts.

GPU (everything CUDA is touched only inside these functions, so the CPU tier never needs it):
- kernel time: CUDA events around each rep, L2 flushed before each rep by writing a buffer twice the
  device's L2, warm-up excluded; median and MAD over reps. When the host launches slower than the
  device runs, the gaps between launches count too (as they do for the program's user).
- host time: warm calls on tiny inputs over a batch of calls closed by one synchronize, by the wall
  clock and by the calling thread's CPU time; median and MAD over batches.
- cold compile time: the first call, with the fuser's kernel cache cleared and a program Dynamo has
  not compiled for these inputs (Triton's and Inductor's on-disk caches are left alone).
- kernel launches per call: the fuser's counters for the fuser; the profiler's CUDA kernels otherwise.
- bandwidth: the fewest bytes the call must move over its kernel time, as a fraction of the device's
  measured copy peak (a large device-to-device copy, bytes read plus bytes written).

CPU tier (no GPU): the deterministic metrics only — kernel launches (the fuser's counters; other
backends have none to read, so None), bytes moved, and instructions per call (`perfgate.instructions`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

import fuser
from perfgate.backends import Backend
from perfgate.instructions import Job, count_instructions
from perfgate.metrics import Measurements, Sample
from perfgate.workloads import Step, Workload

# Kernel time: as many reps as fit in the budget, within MIN_REPS..MAX_REPS, after WARMUP_REPS.
KERNEL_TIME_BUDGET_S = 0.3
MIN_REPS, MAX_REPS, WARMUP_REPS = 25, 200, 3
# Host time: HOST_BATCHES batches, each of as many calls as fit in HOST_BATCH_S (5 to 500).
HOST_BATCHES, HOST_BATCH_S, HOST_CALLS = 9, 0.05, (5, 500)


def launches_per_call(step: Step, backend: Backend, device: str) -> Sample | None:
    """Kernel launches of one warm call; None where nothing can count them (other backends on CPU)."""
    if backend.counted_by_fuser:
        fuser.reset_counters()
        step()
        counts = fuser.counters()
        return Sample.exact(counts["kernels_launched"] + counts["extern_calls"])
    if device == "cpu":
        return None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        step()
        torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    return Sample.exact(sum(1 for event in profile.events() if event.device_type == cuda))


def copy_peak_bytes_per_s(device: str) -> float:
    """Bandwidth of a 1 GiB device-to-device copy, counting bytes read plus bytes written."""
    source = torch.empty(2**30, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    milliseconds = event_times_ms(lambda: target.copy_(source), reps=20, before_each=None).median
    return 2 * source.numel() / (milliseconds * 1e-3)


def l2_flush_buffer(device: str) -> torch.Tensor:
    """A buffer twice the device's L2: writing it evicts whatever the previous rep left there."""
    l2_bytes = torch.cuda.get_device_properties(torch.device(device)).L2_cache_size
    return torch.empty(2 * l2_bytes, dtype=torch.uint8, device=device)


def event_times_ms(call: Callable[[], object], reps: int, before_each: Callable[[], object] | None) -> Sample:
    """Device milliseconds of `call`, per rep between two CUDA events, after WARMUP_REPS untimed reps."""
    for _ in range(WARMUP_REPS):
        call()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        if before_each is not None:
            before_each()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return Sample.of([start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)])


def kernel_time_ms(step: Step, flush: torch.Tensor) -> Sample:
    torch.cuda.synchronize()
    started = time.perf_counter()
    step()
    torch.cuda.synchronize()
    one_call_s = time.perf_counter() - started
    reps = int(min(MAX_REPS, max(MIN_REPS, KERNEL_TIME_BUDGET_S / max(one_call_s, 1e-6))))
    return event_times_ms(step, reps, before_each=flush.zero_)


def host_times_us(step: Step) -> tuple[Sample, Sample]:
    """Microseconds per warm call, as wall time and as the calling thread's CPU time: batches of
    calls, each closed by one synchronize.

    On a shared host, other tenants take the CPU from the launching thread for whole milliseconds:
    wall time counts those stretches, the thread's CPU time does not (its per-process medians of
    unchanged code spread 47-81 us in wall time on a lent H100, docs/perfgate.md)."""
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    started = time.perf_counter()
    step()
    torch.cuda.synchronize()
    fewest, most = HOST_CALLS
    calls = int(min(most, max(fewest, HOST_BATCH_S / max(time.perf_counter() - started, 1e-7))))
    wall, cpu = [], []
    for _ in range(HOST_BATCHES):
        torch.cuda.synchronize()
        started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
        wall.append((time.perf_counter_ns() - started) / calls * 1e-3)
        cpu.append((time.thread_time_ns() - started_cpu) / calls * 1e-3)
    return Sample.of(wall), Sample.of(cpu)


@dataclass
class Prepared:
    """A workload compiled and ready on the GPU: its timed step, its tiny step, its counts so far."""

    step: Step
    tiny_step: Step
    measurements: Measurements


def prepare_on_gpu(workload: Workload, backend: Backend, device: str = "cuda") -> Prepared:
    """Compile (timing the cold first call) and count: everything but the timings."""
    fuser.clear_kernel_cache()
    compiled = backend.compile(workload.program)
    step = Step(workload, compiled, workload.inputs("gpu", device))
    torch.cuda.synchronize()
    started = time.perf_counter()
    outputs = step()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - started
    measurements: Measurements = {
        "kernel_launches": launches_per_call(step, backend, device),
        "bytes_moved": Sample.exact(step.fewest_bytes(outputs)),
        "compile_time_s": Sample.exact(compile_s),
    }
    tiny_step = Step(workload, compiled, workload.inputs("gpu_tiny", device))
    return Prepared(step, tiny_step, measurements)


def time_on_gpu(prepared: Prepared, flush: torch.Tensor, copy_peak: float) -> Measurements:
    """The timings, with the counts of `prepare_on_gpu`."""
    kernel = kernel_time_ms(prepared.step, flush)
    host_wall, host_cpu = host_times_us(prepared.tiny_step)
    moved = prepared.measurements["bytes_moved"].median
    fraction = moved / (kernel.median * 1e-3) / copy_peak
    return prepared.measurements | {
        "kernel_time_ms": kernel,
        "host_time_us": host_wall,
        "host_cpu_us": host_cpu,
        "bandwidth_fraction": Sample.exact(fraction),
    }


def count_on_cpu(workload: Workload, backend: Backend) -> Measurements:
    """Kernel launches and bytes moved of one call at the `cpu` size, in this process."""
    step = Step(workload, backend.compile(workload.program), workload.inputs("cpu", "cpu"))
    outputs = step()
    return {
        "kernel_launches": launches_per_call(step, backend, "cpu"),
        "bytes_moved": Sample.exact(step.fewest_bytes(outputs)),
    }


def instructions_on_cpu(
    workloads: list[Workload], backend: Backend, processes: int | None = None
) -> dict[str, Sample | None]:
    """Instructions per call at the `cpu_tiny` size, under callgrind (None where it cannot run)."""
    if not backend.runs_under_valgrind:
        return dict.fromkeys((w.name for w in workloads), None)
    counts = count_instructions([Job(w.name, backend) for w in workloads], processes)
    return {w.name: count for w, count in zip(workloads, counts, strict=True)}
