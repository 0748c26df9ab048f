"""A kernel's step: its sizes made concrete per binding of the graph's symbols, its arguments prepared
once per binding, and its one or two launches (a split reduction's two stages)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from fuser import metrics
from fuser.emit.codegen import KernelSource, output_strides
from fuser.interpreter.shim import quietly
from fuser.lower.nodes import host_read_values, meta
from fuser.lower.shapes import concrete
from fuser.plan.partition import Kernel
from fuser.runtime import compile_pool, gpu_compile_check, kernel_cache
from fuser.runtime.allocate import allocator
from fuser.runtime.direct_launch import DirectLauncher
from fuser.runtime.launch_config import Config, choose_config, launch_options
from fuser.runtime.step import LaunchStep


@dataclass
class Stage:
    """One kernel launch of a Launch (a split reduction has two), its arguments prepared once: what is
    fixed for the sizes (integers, output strides) sits in `template`; what each call supplies (tensors,
    input strides, outputs, workspaces) is copied into it by position."""

    source: KernelSource
    grid: tuple[int, ...]
    options: dict[str, Any]  # block sizes; on a GPU also warps and gpu_compile_options()
    template: list
    tensors: list[tuple[int, int]]  # (position, env slot)
    strides: list[tuple[int, int, int]]  # (position, env slot, dim)
    outputs: list[tuple[int, int]]  # (position, output index)
    partials: list[tuple[int, int]]  # (position, workspace index)
    launcher: Callable | None = None  # the kernel bound to grid and options, loaded at the first launch
    pending: Future | None = None  # its compile in a worker process (`fuser.runtime.compile_pool`)

    def arguments(self, env: list, outputs: list, partials: list) -> list:
        args = self.template.copy()
        for position, slot in self.tensors:
            args[position] = env[slot]
        for position, slot, dim in self.strides:
            args[position] = env[slot].stride(dim)
        for position, index in self.outputs:
            args[position] = outputs[index]
        for position, index in self.partials:
            args[position] = partials[index]
        return args


@dataclass(frozen=True)
class Launch:
    """A kernel's sizes made concrete for one binding of the graph's symbols."""

    outputs: list[tuple[tuple[int, ...], tuple[int, ...], torch.dtype, int]]  # shape, strides, dtype, slot
    empty: bool  # nothing to compute: no rows, or no elements
    stages: list[Stage]  # the launches, in order (a split reduction's second stage after its first)
    partials: list[tuple[tuple[int, int], torch.dtype]]  # a split reduction's workspaces: shape, dtype
    # The sizes planned for each input an eager step of the graph makes (by env slot): checked per call.
    made_eagerly: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)


@dataclass
class KernelStep(LaunchStep):
    """A kernel launch: reads env slots, allocates its outputs and writes them to env slots."""

    variants: list[KernelSource]  # one for a pointwise kernel; persistent and looped for a row kernel
    kernel: Kernel
    slots: dict[fx.Node, int]
    fallback: Callable[[list, tuple], None]  # runs the same nodes eagerly (used when the kernel fails)
    strict: bool
    symbols: tuple = ()  # the graph's size symbols, in the order of the binding key
    into: dict[fx.Node, fx.Node] = field(default_factory=dict)  # member -> graph input it is stored into
    # Nodes of the graph whose sizes eager steps decide (their results and what is computed from them):
    # their run-time sizes may differ from those recorded when a size depends on data the tracer did
    # not see (a CUDA `_unique` in torch 2.11's backward).
    eager_made: frozenset = frozenset()

    def __post_init__(self):
        self.interpreted = self.kernel.device.type == "cpu"
        self.allocate = allocator(self.kernel.device)
        # Per output: the env slot of the graph input it is written into in place (`fuser.plan.inplace`).
        self.into_slots = [self.slots[self.into[m]] if m in self.into else None for m in self.kernel.members]
        self.flat_inputs = [self.slots[node] for node in self.variants[0].flat_inputs]
        self.host_checks = [
            (self.slots[value], dtype)
            for node in self.kernel.computed
            for value, dtype in host_read_values(node)
        ]
        self.launches: dict[tuple[int, ...], Launch] = {}
        self.gpu_launches: dict[tuple[int, ...], Launch] = {}
        # FUSER_CHECK_CUDA_COMPILE's capability, read once: interpreted launches also compile for it.
        self.check_capability = gpu_compile_check.target_capability() if self.interpreted else None

    @property
    def name(self) -> str:
        return self.variants[0].name  # every variant and stage bears the kernel's name

    @property
    def device(self) -> torch.device:
        return self.kernel.device

    def loaded(self) -> bool:
        return kernel_cache.is_loaded(self.variants[0], self.interpreted)

    def compile_ahead(self, key: tuple[int, ...], capability: int, pool: compile_pool.Pool) -> None:
        """Hand each stage's compile for this binding to `pool`: tensors as their dtypes, an input's
        strides as the graph recorded them (a launch with others compiles its own specialization)."""
        launch = self.launch(key)
        if launch.empty:
            return
        binding = dict(zip(self.symbols, key, strict=True))
        for stage in launch.stages:
            args = stage.template.copy()
            for position, (_, arg) in enumerate(stage.source.params):
                if arg.kind == "tensor":
                    args[position] = meta(arg.node).dtype
                elif arg.kind == "stride":
                    args[position] = concrete(meta(arg.node).stride()[arg.index], binding)
                elif arg.kind == "output":
                    args[position] = launch.outputs[arg.index][2]
                elif arg.kind == "partials":
                    args[position] = launch.partials[arg.index][1]
            path = kernel_cache.kernel_file(stage.source)
            stage.pending = pool.submit(
                compile_pool.job(path, stage.source.name, args, stage.options, capability)
            )

    def launch(self, key: tuple[int, ...]) -> Launch:
        """Concrete sizes and launch configuration for this binding of the symbols (cached)."""
        if key not in self.launches:
            self.launches[key] = self._make_launch(key, self.interpreted)
        return self.launches[key]

    def gpu_launch(self, key: tuple[int, ...]) -> Launch:
        """The launch a GPU would make for this binding (for FUSER_CHECK_CUDA_COMPILE on a CPU)."""
        if key not in self.gpu_launches:
            self.gpu_launches[key] = self._make_launch(key, interpreted=False)
        return self.gpu_launches[key]

    def _make_launch(self, key: tuple[int, ...], interpreted: bool) -> Launch:
        binding = dict(zip(self.symbols, key, strict=True))
        outputs = []
        for member in self.kernel.members:
            value = member.meta["val"]
            shape = tuple(concrete(s, binding) for s in value.shape)
            strides = tuple(concrete(s, binding) for s in output_strides(value))
            outputs.append((shape, strides, value.dtype, self.slots[member]))
        # Each variant numbers its own parameters (a row kernel's persistent and looped variants may
        # name different views `view2`), so each variant's integers are bound on their own.
        ints_of = [
            {name: concrete(arg.value, binding) for name, arg in variant.params if arg.kind == "int"}
            for variant in self.variants
        ]
        ints = ints_of[0]  # the sizes that choose a configuration are the same in every variant
        # Nothing to store: every output has no elements (a kernel with no rows still writes its column
        # sums, zeros, when it has columns).
        empty = bool(outputs) and all(0 in shape for shape, *_ in outputs)
        config = choose_config(self.variants, ints, interpreted)
        stages = []
        stage_config: Config | None = config
        while stage_config is not None:
            stages.append(self._stage(stage_config, ints_of[stage_config.variant], outputs, interpreted))
            stage_config = stage_config.then
        made_eagerly = [
            (self.slots[arg.node], tuple(concrete(size, binding) for size in arg.node.meta["val"].shape))
            for _, arg in self.variants[0].params
            if arg.kind == "tensor" and arg.node in self.eager_made
        ]
        return Launch(outputs, empty, stages, self._partials(config, ints), made_eagerly)

    def _stage(self, config: Config, ints: dict[str, int], outputs: list, interpreted: bool) -> Stage:
        source = self.variants[config.variant]
        options = launch_options(config.blocks, config.warps, interpreted, config.stages)
        stage = Stage(source, config.grid, options, [None] * len(source.params), [], [], [], [])
        for position, (name, arg) in enumerate(source.params):
            if arg.kind == "tensor":
                stage.tensors.append((position, self.slots[arg.node]))
            elif arg.kind == "stride":
                stage.strides.append((position, self.slots[arg.node], arg.index))
            elif arg.kind == "output":
                stage.outputs.append((position, arg.index))
            elif arg.kind == "output_stride":  # outputs are allocated with exactly these strides
                stage.template[position] = outputs[arg.index][1][arg.value]
            elif arg.kind == "partials":
                stage.partials.append((position, arg.index))
            else:
                stage.template[position] = config.ints.get(name, ints[name])
        return stage

    def source_for(self, key: tuple[int, ...]) -> KernelSource:
        """The variant this binding of the symbols launches (what `fuser.explain` shows)."""
        return self.launch(key).stages[0].source

    def prepare(self, launch: Launch, env: list) -> tuple[list, list] | None:
        """The outputs, set in env, and the split reduction's workspaces (None when empty)."""
        outputs = self.outputs(launch, env)
        if launch.empty:
            return None
        if not launch.partials:
            return outputs, ()
        device = self.kernel.device
        return outputs, [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in launch.partials]

    def run(self, launch: Launch, env: list, key: tuple[int, ...], prepared: tuple[list, list]) -> None:
        outputs, partials = prepared
        if self.check_capability is not None:
            self._check_gpu_compile(key, env, outputs, self.check_capability)
        for stage in launch.stages:
            if stage.launcher is None:
                compile_pool.wait(stage.pending)
                stage.launcher = self._launcher(stage)
            stage.launcher(*stage.arguments(env, outputs, partials))
        metrics.bump("kernels_launched", len(launch.stages))

    def outputs(self, launch: Launch, env: list) -> list[torch.Tensor]:
        """The tensors the kernel stores into, set in env: fresh ones, or the graph inputs it writes."""
        outputs, allocate = [], self.allocate
        for (shape, strides, dtype, slot), into in zip(launch.outputs, self.into_slots, strict=True):
            out = allocate(shape, strides, dtype) if into is None else env[into]
            env[slot] = out
            outputs.append(out)
        return outputs

    def _check_gpu_compile(self, key: tuple[int, ...], env: list, outputs: list, capability: int) -> None:
        """Compile, for CUDA, the stages a GPU would launch for these arguments (the CPU tensors stand in
        for the GPU's: same dtypes, sizes and strides)."""
        launch = self.gpu_launch(key)
        partials = [torch.empty(shape, dtype=dtype) for shape, dtype in launch.partials]
        for stage in launch.stages:
            jit_fn = kernel_cache.load_kernel(stage.source, interpreted=False, counted=False)
            gpu_compile_check.compile_for_cuda(
                jit_fn, stage.arguments(env, outputs, partials), stage.options, capability
            )

    def _launcher(self, stage: Stage) -> Callable:
        kernel = kernel_cache.load_kernel(stage.source, self.interpreted)
        if self.interpreted:
            return quietly(kernel[stage.grid], stage.options)
        pointers = [p for p, _ in stage.tensors + stage.outputs + stage.partials]
        integers = [p for p, _, _ in stage.strides]
        return DirectLauncher(kernel, stage.grid, stage.options, pointers, integers)

    def _partials(self, config: Config, ints: dict[str, int]) -> list[tuple[tuple[int, int], torch.dtype]]:
        """Workspaces for partial results (a split reduction's, or a kernel's column sums by row group):
        one tensor of `config.workspace`'s shape each."""
        if config.workspace is None:
            return []
        specs = sorted(
            (arg.index, arg.dtype)
            for _, arg in self.variants[config.variant].params
            if arg.kind == "partials"
        )
        return [(config.workspace, dtype) for _, dtype in specs]
