"""A horizontal kernel's step (`fuser.plan.horizontal`): one table row per part, from the part's arguments
(addresses of its tensors, its integers), so any number of parts of any sizes share one compiled kernel."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import torch
import triton

from fuser import metrics
from fuser.emit.codegen import KernelSource
from fuser.interpreter.shim import quietly
from fuser.runtime import compile_pool, gpu_compile_check, kernel_cache, launch_config
from fuser.runtime.allocate import allocator
from fuser.runtime.direct_launch import DirectLauncher
from fuser.runtime.kernel_step import KernelStep, Launch
from fuser.runtime.step import GraphCaptureError, LaunchStep


@dataclass
class HorizontalLaunch:
    """A horizontal kernel's launch for one binding of the sizes: what does not change between calls,
    and the table of the last call, reused while every value in it is the same (a compiled optimizer's
    parameters and state keep their addresses from step to step): building the table of 200 parts in
    Python each call cost more host time than the kernel on a GPU (docs/gpu-runs.md, 2026-11-26)."""

    programs: torch.Tensor | None  # program -> part; None when no part has an element
    block: int
    constants: torch.Tensor  # the table's flat int64 values that are the same at every call
    positions: torch.Tensor  # where in the flat table each call's values go: addresses, then strides
    expand: torch.Tensor  # which value each position takes: a tensor read by several parts is read once
    addresses: list[int]  # env slots whose tensors' addresses the table holds, each slot once
    strides: list[tuple[int, int]]  # (env slot, dim) of each stride it holds
    # Every part's outputs (`KernelStep.outputs` for all parts at once): those written into a graph
    # input (their env slots, and the inputs' slots in the same order), and fresh ones, (env slot,
    # shape, strides, dtype).
    alias_slots: list[int]
    alias_intos: list[int]
    fresh: list[tuple[int, tuple, tuple, torch.dtype]]
    made_eagerly: list[tuple[int, tuple[int, ...]]]  # every part's (`Launch.made_eagerly`)
    launcher: Callable | None = None  # the kernel bound to its grid and options, made at the first call
    pending: Future | None = None  # its compile in a worker process (`fuser.runtime.compile_pool`)
    table: torch.Tensor | None = None  # the last call's table, on the device
    values: list[int] | None = None  # the read values it holds


class HorizontalStep(LaunchStep):
    """Launches a horizontal kernel over its parts' arguments; the table is rebuilt only when a value in
    it changed since the last call."""

    def __init__(self, source: KernelSource, parts: list[KernelStep], strict: bool):
        self.source = source
        self.name = source.name
        self.parts = parts
        self.strict = strict
        self.device = parts[0].kernel.device
        self.allocate = allocator(self.device)
        self.interpreted = self.device.type == "cpu"
        # Env slots read at the flat offset, by any part: they must be contiguous.
        self.flat_inputs = [slot for part in parts for slot in part.flat_inputs]
        self.host_checks = [check for part in parts for check in part.host_checks]
        self.launches: dict[tuple[int, ...], HorizontalLaunch] = {}
        self.check_capability = gpu_compile_check.target_capability() if self.interpreted else None

    def loaded(self) -> bool:
        return kernel_cache.is_loaded(self.source, self.interpreted)

    def compile_ahead(self, key: tuple[int, ...], capability: int, pool: compile_pool.Pool) -> None:
        """Hand the kernel's compile for this binding to `pool` (its arguments: the table, the program map)."""
        launch = self.launch(key)
        if launch.programs is None:
            return
        options = launch_config.pointwise_options(launch.block, interpreted=False)
        path = kernel_cache.kernel_file(self.source)
        args = [torch.int64, torch.int32]
        launch.pending = pool.submit(compile_pool.job(path, self.source.name, args, options, capability))

    def launch(self, key: tuple[int, ...]) -> HorizontalLaunch:
        if key not in self.launches:
            parts = [part.launch(key) for part in self.parts]
            numels = [
                0 if launch.empty else launch.stages[0].template[_numel_position(part)]
                for part, launch in zip(self.parts, parts, strict=True)
            ]
            block = launch_config.pointwise_block(max(numels), self.interpreted)
            counts = [triton.cdiv(n, block) for n in numels]
            firsts, total = [], 0
            for count in counts:
                firsts.append(total)
                total += count
            owners = [p for p, count in enumerate(counts) for _ in range(count)]
            programs = torch.tensor(owners, dtype=torch.int32, device=self.device) if owners else None
            outputs = [
                (slot, into, shape, strides, dtype)
                for part, launch in zip(self.parts, parts, strict=True)
                for (shape, strides, dtype, slot), into in zip(launch.outputs, part.into_slots, strict=True)
            ]
            aliases = [(slot, into) for slot, into, *_ in outputs if into is not None]
            fresh = [(slot, *rest) for slot, into, *rest in outputs if into is None]
            self.launches[key] = HorizontalLaunch(
                programs,
                block,
                *_table_layout(parts, firsts, [p.into_slots for p in self.parts]),
                [slot for slot, _ in aliases],
                [into for _, into in aliases],
                fresh,
                [made for launch in parts for made in launch.made_eagerly],
            )
        return self.launches[key]

    def prepare(self, launch: HorizontalLaunch, env: list) -> torch.Tensor | None:
        """Every part's outputs, set in env; the program map (None when no part has an element)."""
        # A step of 200 parameters reads a thousand addresses a call: the loops below run in C (map)
        # because Python-level loops over them cost more host time than the kernel takes on a GPU.
        deque(map(env.__setitem__, launch.alias_slots, map(env.__getitem__, launch.alias_intos)), maxlen=0)
        allocate = self.allocate
        for slot, shape, strides, dtype in launch.fresh:
            env[slot] = allocate(shape, strides, dtype)
        return launch.programs

    def run(self, launch: HorizontalLaunch, env: list, key: tuple[int, ...], programs: torch.Tensor) -> None:
        values = list(map(torch.Tensor.data_ptr, map(env.__getitem__, launch.addresses)))
        values += [env[slot].stride(dim) for slot, dim in launch.strides]
        if values != launch.values:
            if not self.interpreted and torch.cuda.is_current_stream_capturing():
                # A CUDA graph would replay this copy from a host buffer freed after the call.
                raise GraphCaptureError(f"{self.name}'s table would change during a capture")
            table = launch.constants.clone()
            table[launch.positions] = torch.tensor(values, dtype=torch.int64)[launch.expand]
            if not self.interpreted:
                table = table.pin_memory().to(self.device, non_blocking=True)
            launch.table, launch.values = table, values
        if launch.launcher is None:
            if self.check_capability is not None:  # FUSER_CHECK_CUDA_COMPILE: as KernelStep does
                jit_fn = kernel_cache.load_kernel(self.source, interpreted=False, counted=False)
                gpu_compile_check.compile_for_cuda(
                    jit_fn,
                    [launch.table, programs],
                    launch_config.pointwise_options(launch_config.GPU_BLOCK, interpreted=False),
                    self.check_capability,
                )
            compile_pool.wait(launch.pending)
            launch.launcher = self._launcher(launch)
        launch.launcher(launch.table, programs)
        metrics.bump("kernels_launched")

    def _launcher(self, launch: HorizontalLaunch) -> Callable:
        kernel = kernel_cache.load_kernel(self.source, self.interpreted)
        grid = (len(launch.programs),)
        options = launch_config.pointwise_options(launch.block, self.interpreted)
        if self.interpreted:
            return quietly(kernel[grid], options)
        return DirectLauncher(kernel, grid, options, pointers=[0, 1], integers=[])  # (table, programs)

    def fallback(self, env: list, key: tuple[int, ...]) -> None:
        for part in self.parts:
            part.fallback(env, key)


def _table_layout(
    parts: list[Launch], firsts: list[int], into_slots: list[list[int | None]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list, list]:
    """A horizontal table's values that are fixed for these sizes (integers, each part's first program);
    where in it each call's values go, and which of them (`expand`, an index into them) each position
    takes; and what they are read from: tensors' addresses (env slots, each once: an output written in
    place has its input's address) and strides ((env slot, dim)), addresses first."""
    rows, address_positions, stride_positions, address_slots, strides = [], [], [], [], []
    for number, (launch, first, into) in enumerate(zip(parts, firsts, into_slots, strict=True)):
        stage = launch.stages[0]
        row = [0 if isinstance(v, torch.Tensor) or v is None else v for v in stage.template] + [first]
        at = number * len(row)
        for position, slot in stage.tensors:
            address_positions.append(at + position)
            address_slots.append(slot)
        for position, slot, dim in stage.strides:
            stride_positions.append(at + position)
            strides.append((slot, dim))
        for position, index in stage.outputs:
            address_positions.append(at + position)
            address_slots.append(launch.outputs[index][3] if into[index] is None else into[index])
        rows.append(row)
    addresses = list(dict.fromkeys(address_slots))
    where = {slot: i for i, slot in enumerate(addresses)}
    expand = [where[slot] for slot in address_slots] + [len(addresses) + i for i in range(len(strides))]
    positions = torch.tensor(address_positions + stride_positions, dtype=torch.int64)
    constants = torch.tensor(rows, dtype=torch.int64).flatten()
    return constants, positions, torch.tensor(expand, dtype=torch.int64), addresses, strides


def _numel_position(part: KernelStep) -> int:
    return [name for name, _ in part.variants[0].params].index("numel")
