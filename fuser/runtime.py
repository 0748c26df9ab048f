"""Run a partitioned graph: launch its kernels and make its eager calls, in order.

Generated kernels are Python modules written to a per-process folder (Triton reads a kernel's source
from its file). A CUDA tensor's kernel is compiled by Triton; a CPU tensor's kernel is the same source
run by Triton's interpreter, with `libdevice` and `lib` rebound to interpreter-friendly versions.
Loaded kernels are cached by their source (without the header comment), so graphs with the same
structure, dtypes and layout classes share one compile whatever their sizes.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy
import torch
import triton
from torch import fx

from fuser import interpreter_libdevice, metrics
from fuser.codegen import Arg, KernelSource, output_strides
from fuser.partition import Kernel

log = logging.getLogger("fuser")

GPU_BLOCK, GPU_WARPS = 1024, 4
# The interpreter runs each program in Python: few large blocks beat many small ones.
CPU_MAX_BLOCK = 2**14


@functools.cache
def _kernel_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="fuser-kernels-"))


def _load_module(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"fuser_generated.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _interpreter_lib() -> types.ModuleType:
    """A copy of fuser.kernel_lib whose helpers are plain functions calling NumPy libdevice."""
    from fuser import kernel_lib

    module = _load_module(Path(kernel_lib.__file__))
    module.libdevice = interpreter_libdevice
    for name, value in vars(module).items():
        if isinstance(value, triton.runtime.JITFunction):
            setattr(module, name, value.fn)
    return module


_kernels: dict[tuple[str, bool], Callable] = {}


def load_kernel(source: KernelSource, interpreted: bool) -> Callable:
    """The launchable kernel for `source`: loaded once per cache key and mode (each load is counted)."""
    key = (source.cache_key, interpreted)
    if key not in _kernels:
        _kernels[key] = _load_kernel(source, interpreted)
        metrics.bump("kernels_compiled")
    return _kernels[key]


def _load_kernel(source: KernelSource, interpreted: bool) -> Callable:
    path = _kernel_dir() / f"{source.name}_{source.cache_key[:16]}.py"
    path.write_text(source.source)
    module = _load_module(path)
    jit_fn = getattr(module, source.name)
    if not interpreted:
        return jit_fn
    from triton.runtime.interpreter import InterpretedFunction

    module.libdevice = interpreter_libdevice
    module.lib = _interpreter_lib()
    return InterpretedFunction(getattr(jit_fn, "fn", jit_fn))


def clear_kernel_cache() -> None:
    """Forget every loaded kernel, so the next launch of each compiles again (cold-compile timing, tests)."""
    _kernels.clear()


def _block(numel: int, interpreted: bool) -> int:
    if not interpreted:
        return GPU_BLOCK
    return min(CPU_MAX_BLOCK, triton.next_power_of_2(max(numel, 1)))


@dataclass
class KernelStep:
    """A kernel launch: reads env slots, allocates its outputs and writes them to env slots."""

    source: KernelSource
    kernel: Kernel
    slots: dict[fx.Node, int]
    fallback: Callable[[list], None]  # runs the same nodes eagerly (used when the kernel fails)
    strict: bool

    def __post_init__(self):
        self.interpreted = self.kernel.device.type == "cpu"
        self.numel = 1
        for size in self.kernel.shape:
            self.numel *= size
        self.out_specs = [
            (tuple(m.meta["val"].shape), output_strides(m.meta["val"]), m.meta["val"].dtype, self.slots[m])
            for m in self.kernel.members
        ]
        self.flat_inputs = [self.slots[node] for node in self.source.flat_inputs]
        self.failed = False

    def __call__(self, env: list) -> None:
        if self.failed:
            self.fallback(env)
            return
        device = self.kernel.device
        outputs = [
            torch.empty_strided(shape, strides, dtype=dtype, device=device)
            for shape, strides, dtype, _ in self.out_specs
        ]
        for (_, _, _, slot), out in zip(self.out_specs, outputs, strict=True):
            env[slot] = out
        if self.numel == 0:
            return
        for slot in self.flat_inputs:
            if not env[slot].is_contiguous():
                raise RuntimeError(
                    f"fuser: kernel {self.source.name} was generated for a contiguous input but got strides "
                    f"{env[slot].stride()}; this is a bug in the fuser's layout tracking"
                )
        args = [self._arg(arg, env, outputs) for _, arg in self.source.params]
        block = _block(self.numel, self.interpreted)
        try:
            kernel = load_kernel(self.source, self.interpreted)
            grid = (triton.cdiv(self.numel, block),)
            if self.interpreted:
                # Masked-off lanes may divide by zero; NumPy would warn about values nobody stores.
                with numpy.errstate(divide="ignore", invalid="ignore", over="ignore"):
                    kernel[grid](*args, self.numel, BLOCK=block)
            else:
                kernel[grid](*args, self.numel, BLOCK=block, num_warps=GPU_WARPS)
        except Exception as error:
            if self.strict:
                raise
            log.warning(
                "fuser: kernel %s failed (%s: %s); running its nodes eagerly",
                self.source.name,
                type(error).__name__,
                error,
            )
            metrics.bump("fallbacks")
            self.failed = True
            self.fallback(env)
            return
        metrics.bump("kernels_launched")

    def _arg(self, arg: Arg, env: list, outputs: list) -> Any:
        if arg.kind == "tensor":
            return env[self.slots[arg.node]]
        if arg.kind == "output":
            return outputs[arg.index]
        if arg.kind == "stride":
            return env[self.slots[arg.node]].stride(arg.index)
        if arg.kind == "output_stride":
            return outputs[arg.index].stride(arg.value)
        return arg.value


def _materialize(arg: Any, env: list, slots: dict[fx.Node, int]) -> Any:
    return fx.node.map_arg(arg, lambda n: env[slots[n]])


@dataclass
class EagerStep:
    """An aten call made eagerly (an op the fuser does not lower, a view, a getitem)."""

    node: fx.Node
    slots: dict[fx.Node, int]
    counted: bool  # views and getitems are bookkeeping, not extern calls

    def __call__(self, env: list) -> None:
        args = _materialize(self.node.args, env, self.slots)
        kwargs = _materialize(self.node.kwargs, env, self.slots)
        env[self.slots[self.node]] = self.node.target(*args, **kwargs)
        if self.counted:
            metrics.bump("extern_calls")


class CompiledGraph:
    """The callable AOTAutograd gets back: boxed arguments in, a list of outputs out."""

    _boxed_call = True

    def __init__(
        self, graph_module: fx.GraphModule, steps: list, slots: dict[fx.Node, int], frees: list[list[int]]
    ):
        self.graph_module = graph_module
        self.steps = steps
        self.slots = slots
        self.frees = frees
        graph = graph_module.graph
        self.placeholders = [slots[n] for n in graph.nodes if n.op == "placeholder"]
        self.attributes = [
            (slots[n], _fetch_attr(graph_module, n.target)) for n in graph.nodes if n.op == "get_attr"
        ]
        (output,) = [n for n in graph.nodes if n.op == "output"]
        self.output_spec = output.args[0]

    def __call__(self, args: list) -> Any:
        env: list = [None] * len(self.slots)
        for slot, value in zip(self.placeholders, args, strict=True):
            env[slot] = value
        args.clear()  # the boxed calling convention: let inputs be freed as soon as possible
        for slot, value in self.attributes:
            env[slot] = value
        for step, frees in zip(self.steps, self.frees, strict=True):
            step(env)
            for slot in frees:
                env[slot] = None
        return list(_materialize(self.output_spec, env, self.slots))


def _fetch_attr(module: torch.nn.Module, target: str) -> Any:
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value
