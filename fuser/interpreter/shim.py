"""A generated kernel made ready for Triton's interpreter: its module's `libdevice` and `lib` rebound to
NumPy versions, so the source compiled for a GPU runs unchanged on CPU tensors."""

from __future__ import annotations

import functools
import importlib.util
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy
import triton

from fuser.interpreter import bf16, libdevice, reduce, triton_patches
from fuser.lower.reductions import KINDS


def interpreted_kernel(module: types.ModuleType, jit_fn: Any) -> Callable:
    """`jit_fn`, a kernel of the freshly loaded `module`, as the interpreter runs it."""
    from triton.runtime.interpreter import InterpretedFunction

    module.libdevice = libdevice
    module.lib = interpreter_lib()
    return InterpretedFunction(getattr(jit_fn, "fn", jit_fn))


def quietly(launch: Callable, options: dict[str, Any]) -> Callable:
    """An interpreted launch with its block sizes bound. Masked-off lanes may divide by zero: NumPy would
    warn about values nobody stores."""

    def run(*args: Any) -> None:
        with numpy.errstate(divide="ignore", invalid="ignore", over="ignore"):
            launch(*args, **options)

    return run


class _PlainFunction:
    """A helper called directly under the interpreter; `.fn` is what tl.reduce's interpreter calls."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


@functools.cache
def interpreter_lib() -> types.ModuleType:
    """A copy of fuser.kernel_lib whose helpers are plain functions calling NumPy libdevice (a second
    instance loaded from its file, so GPU kernels keep the original's helpers)."""
    from fuser import kernel_lib

    path = Path(kernel_lib.__file__)
    spec = importlib.util.spec_from_file_location(f"fuser_generated.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.libdevice = libdevice
    for name, value in vars(module).items():
        if isinstance(value, triton.runtime.JITFunction):
            setattr(module, name, _PlainFunction(value.fn))
    # The interpreter folds a row left to right through a combine function (slow, and a long float
    # row loses precision), except for its own sum's combine, which it hands to NumPy's pairwise sum.
    module.add = triton.language.standard._sum_combine
    # And the interpreter calls any other combine function once per element: the fuser's get NumPy twins.
    reduce.install()
    triton_patches.drop_dead_overflow_checks()
    triton_patches.index_by_squeezing()
    for kind in KINDS.values():  # each reduction kind names its combine functions' twins
        for name, twin in kind.numpy_twins.items():
            getattr(module, name).numpy_reduce = getattr(reduce, twin)
    module.widen_bf16 = bf16.widen_bf16
    module.narrow_bf16 = bf16.narrow_bf16
    return module
