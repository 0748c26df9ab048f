"""The launch path: a kernel compiled for one call's argument specialization must not serve a call whose
arguments specialize differently (fuser.runtime.direct_launch skips Triton's own lookup once compiled)."""

from __future__ import annotations

import torch

import fuser
from fuser.runtime.direct_launch import DirectLauncher


def scale_and_shift(x: torch.Tensor) -> torch.Tensor:
    return x * 3.0 + 1.0


def test_a_misaligned_input_after_an_aligned_one_gets_its_own_compile(device):
    # Triton assumes 16-byte alignment for a pointer compiled as aligned (vector loads): a view one
    # element into a buffer, same shape and strides, must not reuse that compile.
    compiled = fuser.compile(scale_and_shift, strict=True)
    buffer = torch.randn(4097, device=device)
    aligned, misaligned = buffer[:4096], buffer[1:]
    for x in (aligned, misaligned, aligned, misaligned):
        torch.testing.assert_close(compiled(x), scale_and_shift(x))


class _Compiled:
    """Stands in for Triton's CompiledKernel: records direct launches."""

    def __init__(self, calls: list):
        self.calls = calls

    def __getitem__(self, grid):
        return lambda *args: self.calls.append(("direct", grid, args))


class _JitFunction:
    """Stands in for Triton's JITFunction: records launches through `run`."""

    arg_names = ("in_ptr", "stride", "BLOCK")

    def __init__(self):
        self.calls: list = []

    def __getitem__(self, grid):
        def run(*args, **options):
            self.calls.append(("run", grid, args, options))
            return _Compiled(self.calls)

        return run


class _Pointer:
    def __init__(self, address: int):
        self.address = address

    def data_ptr(self) -> int:
        return self.address


def test_direct_launch_reuses_a_compile_only_for_the_same_specialization():
    jit = _JitFunction()
    launch = DirectLauncher(jit, (7,), {"BLOCK": 128, "num_warps": 4}, pointers=[0], integers=[1])
    aligned, also_aligned, misaligned = _Pointer(4096), _Pointer(8192), _Pointer(4100)
    launch(aligned, 32)  # compiles through run
    launch(also_aligned, 48)  # same classes: aligned pointer, int divisible by 16 -> direct
    launch(misaligned, 48)  # a new pointer class -> run
    launch(aligned, 1)  # an int of 1 is a constant in Triton's specialization -> run
    launch(aligned, 33)  # not divisible by 16 -> run
    launch(also_aligned, 2**33)  # past 32 bits -> run
    launch(aligned, 64)  # seen at the second call -> direct
    kinds = [call[0] for call in jit.calls]
    assert kinds == ["run", "direct", "run", "run", "run", "run", "direct"]
    assert jit.calls[0] == ("run", (7,), (aligned, 32), {"BLOCK": 128, "num_warps": 4})
    # direct launches pass every parameter in order, constexprs last, on a three-dimensional grid
    assert jit.calls[1] == ("direct", (7, 1, 1), (also_aligned, 48, 128))


class _Launcher:
    """Stands in for Triton's CompiledKernel with its own launcher exposed (`run` and what it takes)."""

    function, packed_metadata = 0xF00, ("warps", 4)

    def __init__(self):
        self.calls: list = []

    def __getitem__(self, grid):
        return lambda *args: self.calls.append(("runner", grid, args))

    def run(self, *args):
        self.calls.append(("run", args))

    def launch_metadata(self, grid, stream, *args):
        return ("metadata", grid, stream)


def test_the_lean_runner_calls_the_kernels_launcher_with_the_current_stream(monkeypatch):
    from triton import knobs

    from fuser.runtime import direct_launch

    monkeypatch.setattr(direct_launch, "current_stream", lambda: 77)
    kernel = _Launcher()
    launch = direct_launch.lean_runner(kernel, (5, 1, 1))
    launch("x", 3)
    # no launch hook registered: no metadata and no hooks, every argument after the grid and stream
    assert kernel.calls == [("run", (5, 1, 1, 77, 0xF00, ("warps", 4), None, None, None, "x", 3))]
    hook = [].append
    knobs.runtime.launch_enter_hook.add(hook)  # a HookChain in Triton 3.6 to 3.9
    try:
        launch("y", 4)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    # a profiler's hook registered: it gets the launch's metadata, as through Triton's runner
    _, args = kernel.calls[-1]
    assert args[:7] == (5, 1, 1, 77, 0xF00, ("warps", 4), ("metadata", (5, 1, 1), 77))
    assert args[7] is not None and args[-2:] == ("y", 4)


def test_a_kernel_without_an_exposed_launcher_keeps_tritons_runner():
    from fuser.runtime import direct_launch

    calls: list = []
    launch = direct_launch.lean_runner(_Compiled(calls), (2, 1, 1))
    launch("z")
    assert calls == [("direct", (2, 1, 1), ("z",))]
