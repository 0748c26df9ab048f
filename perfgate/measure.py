"""Measurements of one workload on one backend: GPU timings and counts, and the CPU tier's counts.

GPU (everything CUDA is touched only inside these functions, so the CPU tier never needs it):
- kernel time: CUDA events around each rep, L2 flushed before each rep by writing a buffer twice the
  device's L2, a sleep kernel holding the stream until the whole call is queued (so launch gaps,
  the host's cost, are not counted), warm-up excluded; median and MAD over reps.
- host time: warm calls on tiny inputs over a batch of calls closed by one synchronize, by the wall
  clock, and relative to an eager reference call timed right after each batch (the host's speed
  drifts); median and MAD over batches.
- cold compile time: the first call, with the fuser's kernel cache cleared and a program Dynamo has
  not compiled for these inputs (Triton's and Inductor's on-disk caches are left alone).
- kernel launches per call: the fuser's counters for the fuser; the profiler's CUDA kernels otherwise.
- bandwidth: the fewest bytes the call must move over its kernel time, as a fraction of the device's
  measured copy peak (a large device-to-device copy, bytes read plus bytes written).

CPU tier (no GPU): the deterministic metrics only — kernel launches (the fuser's counters; other
backends have none to read, so None), bytes moved, and instructions per call (`perfgate.instructions`).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

import fuser
from perfgate.backends import Backend
from perfgate.instructions import Job, count_instructions
from perfgate.metrics import Measurements, Sample
from perfgate.workloads import Step, Workload, tensors_in

# Kernel time: as many reps as fit in the budget, within MIN_REPS..MAX_REPS, after WARMUP_REPS.
KERNEL_TIME_BUDGET_S = 0.3
MIN_REPS, MAX_REPS, WARMUP_REPS = 25, 200, 3
# The sleep kernel before each rep: HOLD_FACTOR times the call's enqueue time, in cycles at a clock no
# GPU exceeds (a faster clock only shortens the hold).
HOLD_FACTOR, HOLD_CLOCK_HZ = 4, 2.0e9
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


def event_times_ms(
    call: Callable[[], object],
    reps: int,
    before_each: Callable[[], object] | None,
    hold_cycles: int = 0,
) -> Sample:
    """Device milliseconds of `call`, per rep between two CUDA events, after WARMUP_REPS untimed reps.

    With `hold_cycles`, a sleep kernel holds the stream before each rep's first event, long enough
    for the host to queue the whole call behind it: the events then time the device's work alone,
    not the gaps a slow host leaves between launches."""
    for _ in range(WARMUP_REPS):
        call()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        if before_each is not None:
            before_each()
        if hold_cycles:
            torch.cuda._sleep(hold_cycles)
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return Sample.of([start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)])


def enqueue_seconds(call: Callable[[], object]) -> float:
    """Host wall time to issue one call, without waiting for it (the median of a few)."""
    issued = []
    for _ in range(5):
        torch.cuda.synchronize()
        started = time.perf_counter()
        call()
        issued.append(time.perf_counter() - started)
    torch.cuda.synchronize()
    return statistics.median(issued)


def kernel_time_ms(step: Step, flush: torch.Tensor) -> Sample:
    """Device time of one call, its launches queued before the first runs (see event_times_ms).

    Launch gaps are the host's cost, judged by host time: counted here, they made one workload's
    kernel time vary 28% between processes of one tree on a lent H100 while its device time
    varied 0.1% (perfgate.spread, docs/perfgate.md)."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    step()
    torch.cuda.synchronize()
    one_call_s = time.perf_counter() - started
    reps = int(min(MAX_REPS, max(MIN_REPS, KERNEL_TIME_BUDGET_S / max(one_call_s, 1e-6))))
    hold_cycles = int(HOLD_FACTOR * enqueue_seconds(step) * HOLD_CLOCK_HZ)
    return event_times_ms(step, reps, before_each=flush.zero_, hold_cycles=hold_cycles)


def reference_call(device: str, training: bool = False) -> Callable[[], object]:
    """The host's yardstick, the same code in every tree and process: one eager tiny add, and for a
    training workload the add and its gradient through autograd's engine. A training step hands the
    backward to the engine's device thread and waits for it; that wake-up's cost depends on where the
    threads run, so it moves from one process to the next (add_layer_norm_backward at 290-860 us a call
    on one lent H100), and only a yardstick that pays it too moves with it (records/perfgate-settle-
    h100-2026-11-27.md: process-to-process max/min of host_relative 1.30 -> 1.14)."""
    a, b = torch.ones(8, device=device, requires_grad=training), torch.ones(8, device=device)
    if training:
        grad = torch.ones_like(b)
        return lambda: torch.autograd.grad(torch.add(a, b), [a], grad)
    out = torch.empty_like(a)
    return lambda: torch.add(a, b, out=out)


def _per_call_us(call: Callable[[], object], calls: int) -> float:
    torch.cuda.synchronize()
    started = time.perf_counter_ns()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - started) / calls * 1e-3


def host_times_us(step: Step) -> tuple[Sample, Sample]:
    """Host time per warm call on tiny inputs: microseconds of wall time, and the same as a multiple
    of the reference call's (`reference_call`), timed in the batch right after (batches of calls, each closed by one
    synchronize; median and MAD over batches).

    The host of a lent GPU changes speed from one process to the next and within one (per-process
    medians of unchanged code spread 44-110 us on an H100, the thread's CPU time with them): the
    reference call slows with it, so the ratio keeps what the compiled program's own code costs."""
    reference = reference_call(next(iter(tensors_in(step.inputs))).device, step.workload.backward)
    for _ in range(10):
        step()
        reference()
    started = time.perf_counter()
    _per_call_us(step, 1)
    fewest, most = HOST_CALLS
    calls = int(min(most, max(fewest, HOST_BATCH_S / max(time.perf_counter() - started, 1e-7))))
    wall, relative = [], []
    gc.collect()
    gc.disable()  # a collection landing in one batch is not the program's cost
    try:
        for _ in range(HOST_BATCHES):
            step_us = _per_call_us(step, calls)
            wall.append(step_us)
            relative.append(step_us / _per_call_us(reference, calls))
    finally:
        gc.enable()
    return Sample.of(wall), Sample.of(relative)


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
    host_wall, host_relative = host_times_us(prepared.tiny_step)
    moved = prepared.measurements["bytes_moved"].median
    fraction = moved / (kernel.median * 1e-3) / copy_peak
    return prepared.measurements | {
        "kernel_time_ms": kernel,
        "host_time_us": host_wall,
        "host_relative": host_relative,
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
) -> dict[str, Measurements]:
    """Instructions per call at the `cpu_tiny` size, and in the backend's compile step where it offers a
    hook, under callgrind (nothing where it cannot run)."""
    if not backend.runs_under_valgrind:
        return {w.name: {} for w in workloads}
    counts = count_instructions([Job(w.name, backend) for w in workloads], processes)
    return {w.name: count for w, count in zip(workloads, counts, strict=True)}
