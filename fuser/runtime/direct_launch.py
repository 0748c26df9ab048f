"""Launching a compiled Triton kernel on a GPU without JITFunction.run's per-call work.

`JITFunction.run` binds every argument, specializes each one, hashes the result and looks the compiled
kernel up: about 25 µs of host time a launch on the H100 box, more than the rest of a small kernel's call.
A compiled kernel serves every later call whose arguments specialize the same way. Triton (3.6 to 3.9)
specializes a pointer on 16-byte alignment, and an integer on being 1 (then baked in as a constant), on
divisibility by 16 and on fitting 32 bits. So a launch works out that much itself from the arguments that
change between calls, goes through `run` only for a specialization it has not seen, and otherwise calls the
compiled kernel, which takes every parameter in order, constexprs included.

It calls that kernel's own launcher (`CompiledKernel.run`) as `CompiledKernel[grid]`'s runner would, less
the runner's lookups a call: the current stream comes straight from torch, and where no profiler has
registered a launch hook, none is built or called (about 4 µs of a 9 µs launch on the H200 box,
records/call-path-parts-h200-2026-11-28-s19.md). A Triton without those attributes gets the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

try:
    from triton import knobs
except ImportError:  # a Triton before 3.4: launches go through its runner
    knobs = None

_INT32 = range(-(2**31), 2**31)
_LAUNCHER_ATTRIBUTES = ("run", "function", "packed_metadata", "launch_metadata")


def current_stream() -> int:
    """The current device's current CUDA stream, as Triton's runner finds it (torch's raw stream)."""
    return torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())


def _idle(hook: Any) -> bool:
    # Triton 3.6 to 3.9 hold launch hooks in a HookChain (its `calls`); older ones, a callable or None.
    return not getattr(hook, "calls", hook)


def lean_runner(kernel: Any, grid3: tuple[int, int, int]) -> Callable:
    """`kernel[grid3]` (Triton's runner for a compiled kernel), with the lookups above done once."""
    runner = kernel[grid3]  # also loads the kernel's module on the device (its handles)
    if knobs is None or not all(hasattr(kernel, name) for name in _LAUNCHER_ATTRIBUTES):
        return runner
    run, function, packed = kernel.run, kernel.function, kernel.packed_metadata
    hooks = knobs.runtime

    def launch(*args: Any) -> None:
        stream = current_stream()
        enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
        if _idle(enter) and _idle(leave):
            run(*grid3, stream, function, packed, None, None, None, *args)
        else:  # a profiler listens: its hooks get the launch's metadata, as through the runner
            metadata = kernel.launch_metadata(grid3, stream, *args)
            run(*grid3, stream, function, packed, metadata, enter, leave, *args)

    return launch


def _int_class(value: int) -> tuple[bool, bool, bool]:
    return value == 1, value % 16 == 0, value in _INT32


class DirectLauncher:
    """A Triton kernel bound to one grid, its constexprs (block sizes) and compile options (warps...)."""

    def __init__(
        self,
        jit_fn: Any,
        grid: tuple[int, ...],
        options: dict[str, Any],
        pointers: Sequence[int],
        integers: Sequence[int],
    ):
        self.through_run = jit_fn[grid]
        self.options = options
        names = list(jit_fn.arg_names)
        constexprs = [name for name in names if name in options]
        # The fuser's kernels put their constexprs (passed to `run` by name) last; a kernel that does
        # not is always launched through `run`.
        self.direct = names[len(names) - len(constexprs) :] == constexprs
        self.constexprs = [options[name] for name in constexprs]
        self.grid3 = (*grid, 1, 1)[:3]
        self.pointers = list(pointers)  # positions of arguments that change between calls
        self.integers = list(integers)
        self.compiled: dict[tuple, Callable] = {}

    def __call__(self, *args: Any) -> None:
        key = (  # list comprehensions: a generator in tuple() costs more per launch
            tuple([args[p].data_ptr() % 16 == 0 for p in self.pointers]),
            tuple([_int_class(args[p]) for p in self.integers]),
        )
        runner = self.compiled.get(key)
        if runner is None:
            kernel = self.through_run(*args, **self.options)
            if self.direct:
                self.compiled[key] = lean_runner(kernel, self.grid3)
        else:
            runner(*args, *self.constexprs)
