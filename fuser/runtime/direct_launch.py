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

Where torch has one, a kernel is launched through torch's static CUDA launcher instead, as the default
backend launches its kernels: Triton builds a C launcher per kernel signature with the host's C compiler
at the kernel's first launch (Triton 3.6; 27 builds, 9.5 s of a gpt2 first call on the H200 box; Triton 3.8
and 3.9 launch every signature through one generic launcher instead), while torch's was compiled with
torch. A kernel it cannot launch as Triton would (a launch hook registered, scratch memory, several CTAs,
instrumentation, a half-precision scalar parameter), or FUSER_STATIC_LAUNCH=0, keeps Triton's own launcher.
A launch calls torch's C entry point (`_launch_kernel`) itself, with the launcher's fixed fields read once:
its Python `run` checks and rebuilds them each launch (7.4 µs a launch directly against 9.6 through `run`
on the H200 box, session 21). FUSER_STATIC_LAUNCH=run launches through that `run`, to measure the difference.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

try:
    from triton import knobs
except ImportError:  # a Triton before 3.4: launches go through its runner
    knobs = None

log = logging.getLogger("fuser")
_INT32 = range(-(2**31), 2**31)
_LAUNCHER_ATTRIBUTES = ("run", "function", "packed_metadata", "launch_metadata")


def current_device() -> int:
    return torch._C._cuda_getDevice()


def stream_of(device: int) -> int:
    """The device's current CUDA stream, as Triton's runner finds it (torch's raw stream)."""
    return torch._C._cuda_getCurrentRawStream(device)


def _idle(hook: Any) -> bool:
    # Triton 3.6 to 3.9 hold launch hooks in a HookChain (its `calls`); older ones, a callable or None.
    return not getattr(hook, "calls", hook)


def lean_runner(kernel: Any, grid3: tuple[int, int, int]) -> Callable:
    """`kernel[grid3]` (Triton's runner for a compiled kernel), with the lookups above done once; it takes
    the stream, then the kernel's arguments."""
    runner = kernel[grid3]  # also loads the kernel's module on the device (its handles)
    if knobs is None or not all(hasattr(kernel, name) for name in _LAUNCHER_ATTRIBUTES):
        return lambda stream, *args: runner(*args, stream=stream)
    run, function, packed = kernel.run, kernel.function, kernel.packed_metadata
    hooks = knobs.runtime

    def launch(stream: int, *args: Any) -> None:
        enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
        if _idle(enter) and _idle(leave):
            run(*grid3, stream, function, packed, None, None, None, *args)
        else:  # a profiler listens: its hooks get the launch's metadata, as through the runner
            metadata = kernel.launch_metadata(grid3, stream, *args)
            run(*grid3, stream, function, packed, metadata, enter, leave, *args)

    return launch


@functools.cache
def static_launcher_class() -> type | None:
    """torch's `StaticallyLaunchedCudaKernel`, or None where this torch has no static CUDA launcher (a CPU
    or ROCm build) or FUSER_STATIC_LAUNCH=0."""
    if os.environ.get("FUSER_STATIC_LAUNCH", "1") == "0" or not hasattr(torch._C, "_StaticCudaLauncher"):
        return None
    if torch.version.hip:  # ROCm kernels take both scratch parameters always: `run` knows, `_c_entry` not
        return None
    return torch_launcher_class()


def torch_launcher_class() -> type | None:
    """The class itself, on any build (its module was renamed between torch 2.11 and 2.13)."""
    for module in ("static_triton_launcher", "static_cuda_launcher"):
        try:
            return importlib.import_module(f"torch._inductor.runtime.{module}").StaticallyLaunchedCudaKernel
        except (ImportError, AttributeError):
            continue
    return None


def launched_positions(kernel: Any) -> list[int]:
    """The positions of the parameters the compiled kernel takes: every one but its constants (constexprs,
    and an integer Triton specialized as the constant 1), which only its compile used."""
    names = list(kernel.src.fn.arg_names)

    def position(key: Any) -> int:  # an argument's name (Triton 3.6+), or an index or (index,) before
        return names.index(key) if isinstance(key, str) else key[0] if isinstance(key, tuple) else key

    constants = {position(key) for key in getattr(kernel.src, "constants", {})}
    typed = sorted((position(key), ty) for key, ty in kernel.src.signature.items())
    return [i for i, ty in typed if ty != "constexpr" and i not in constants]


# Scalar parameter types torch's launcher passes as Triton's does (a half scalar it would write as float32
# bits, where Triton packs 16); pointers (`*...`) too.
_STATIC_SCALARS = frozenset(
    {"i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp32", "fp64"}
)


def _refusal(kernel: Any) -> str | None:
    """Why torch's launcher would not launch `kernel` as Triton's does, or None (as Inductor refuses)."""
    metadata = kernel.metadata
    if getattr(metadata, "instrumentation_mode", ""):
        return "instrumented: Triton adds parameters of its own"
    if getattr(metadata, "launch_pdl", False) or getattr(metadata, "launch_cooperative_grid", False):
        return "a programmatic-dependent or cooperative launch"
    for ty in kernel.src.signature.values():
        if ty != "constexpr" and not (isinstance(ty, str) and (ty[:1] == "*" or ty in _STATIC_SCALARS)):
            return f"a parameter of type {ty}"
    return None


def _static_kernel(kernel: Any, device: int) -> tuple[Any, list[int]] | None:
    """torch's launcher of the compiled `kernel`, its module loaded on `device`, and the positions of the
    parameters it takes: made once per compiled kernel and device (so a model's identical layers share one
    module, as through Triton's launcher), or None where it cannot launch it (the reason logged once)."""
    made = kernel.__dict__.setdefault("_fuser_static", {})
    if device in made:
        return made[device]
    made[device] = None
    try:
        refused = _refusal(kernel)
        if refused:
            raise NotImplementedError(refused)
        if getattr(kernel, "_cubin_path", None) is None:  # where torch's launcher reads the binary from
            kernel._cubin_path = next(
                p for name, p in kernel.metadata_group.items() if name.endswith(".cubin")
            )
        static = static_launcher_class()(kernel)
        try:
            static.load_kernel(device)
        except TypeError:  # torch 2.8's took no device
            static.load_kernel()
        keep = launched_positions(kernel)
        triton_count = sum(ty != "constexpr" for ty in kernel.src.signature.values())
        if not len(keep) == len(static.arg_tys) == triton_count:
            raise NotImplementedError(
                f"{len(keep)} parameters, torch's {len(static.arg_tys)}, Triton's {triton_count}"
            )
    except Exception as error:  # NotImplementedError, or a torch or Triton whose fields differ
        log.info("fuser: %s keeps Triton's launcher: %s", getattr(kernel, "name", "a kernel"), error)
        return None
    made[device] = static, keep
    return made[device]


class StaticLaunch:
    """A launch of a compiled kernel through torch's static CUDA launcher on one device and grid: called
    with the stream, then the kernel's arguments. Its fields are what a generated call function
    (`fuser.runtime.call_function`) writes out: torch's C entry point, the fields before the arguments,
    the positions of the arguments the kernel takes and the scratch parameters after them."""

    def __init__(self, kernel: Any, grid3: tuple[int, int, int], static: Any, keep: list[int]):
        self.kernel, self.grid3, self.static, self.keep = kernel, grid3, static, keep
        self.entry, self.fixed, self.scratch = _c_entry(static, grid3) or (None, (), ())

    def __call__(self, stream: int, *args: Any) -> None:
        hooks = knobs.runtime
        if not (_idle(hooks.launch_enter_hook) and _idle(hooks.launch_exit_hook)):
            # a profiler listens: Triton's launcher calls its hooks
            lean_runner(self.kernel, self.grid3)(stream, *args)
        elif self.entry is not None:
            self.entry(*self.fixed, (*[args[i] for i in self.keep], *self.scratch), stream)
        else:
            self.static.run(*self.grid3, stream, *[args[i] for i in self.keep])


def hooks_idle() -> bool:
    """No profiler has registered a Triton launch hook (a launch written out calls none)."""
    hooks = knobs.runtime
    return _idle(hooks.launch_enter_hook) and _idle(hooks.launch_exit_hook)


def static_runner(kernel: Any, grid3: tuple[int, int, int], device: int) -> StaticLaunch | None:
    """A launch of the compiled `kernel` through torch's static CUDA launcher on `device`, or None where it
    cannot launch it."""
    if static_launcher_class() is None or knobs is None:
        return None
    found = _static_kernel(kernel, device)
    if found is None:
        return None
    return StaticLaunch(kernel, grid3, *found)


def _c_entry(static: Any, grid3: tuple[int, int, int]) -> tuple[Callable, tuple, tuple] | None:
    """torch's `_launch_kernel(function, grid x, y, z, warps, shared memory, argument types, arguments,
    stream)`, the fields before the arguments, and the scratch parameters (None) that follow them on CUDA:
    what the launcher's `run` passes (torch 2.13 checked on the CPU by tests/fuser/test_launches.py, 2.11
    on the H200). None where its fields differ, or FUSER_STATIC_LAUNCH=run."""
    if os.environ.get("FUSER_STATIC_LAUNCH") == "run":
        return None
    try:
        scratch = (None,) * (bool(static.has_global_scratch) + bool(static.has_profile_scratch))
        fixed = (
            static.function,
            *grid3,
            static.num_warps,
            static.shared,
            static.arg_tys + "O" * len(scratch),
        )
        return static.C_impl._launch_kernel, fixed, scratch
    except AttributeError:
        return None


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
        self.jit_fn, self.grid = jit_fn, grid
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
        device = current_device()  # looked up once a launch: the key's and the stream's
        key = (  # list comprehensions: a generator in tuple() costs more per launch
            tuple([args[p].data_ptr() % 16 == 0 for p in self.pointers]),
            tuple([_int_class(args[p]) for p in self.integers]),
            device,  # a kernel's module is loaded on one device
        )
        runner = self.compiled.get(key)
        if runner is None:
            if not self.direct:
                self.through_run(*args, **self.options)
                return
            # compiled for this specialization (not launched: its runner launches it)
            kernel = self.jit_fn.run(*args, grid=self.grid, warmup=True, **self.options)
            kernel = kernel.result() if hasattr(kernel, "result") else kernel  # Triton's async compile mode
            if kernel is None:  # a compile hook took the compile over: Triton's `run` launches
                self.through_run(*args, **self.options)
                return
            runner = static_runner(kernel, self.grid3, device) or lean_runner(kernel, self.grid3)
            self.compiled[key] = runner
        runner(stream_of(device), *args, *self.constexprs)

    def written_out(self, device: int) -> StaticLaunch | None:
        """The static launch of the specialization every later call of a generated call function makes
        (`fuser.runtime.call_function`): every pointer 16-byte aligned, on `device`, for a kernel that
        takes no integer that changes between calls; None where there is none, or it has no C entry."""
        if self.integers:
            return None
        runner = self.compiled.get(((True,) * len(self.pointers), (), device))
        return runner if isinstance(runner, StaticLaunch) and runner.entry is not None else None
