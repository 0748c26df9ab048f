"""The launch path: a kernel compiled for one call's argument specialization must not serve a call whose
arguments specialize differently (fuser.runtime.direct_launch skips Triton's own lookup once compiled)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
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
    """Stands in for Triton's CompiledKernel: records direct launches, with their stream."""

    def __init__(self, calls: list):
        self.calls = calls

    def __getitem__(self, grid):
        return lambda *args, stream=None: self.calls.append(("direct", grid, args, stream))


class _JitFunction:
    """Stands in for Triton's JITFunction: records compiles (`run` with warmup, which launches nothing)."""

    arg_names = ("in_ptr", "stride", "BLOCK")

    def __init__(self):
        self.calls: list = []

    def __getitem__(self, grid):
        return lambda *args, **options: self.run(*args, grid=grid, warmup=False, **options)

    def run(self, *args, grid, warmup, **options):
        self.calls.append(("compile" if warmup else "run", grid, args, options))
        return _Compiled(self.calls)


class _Pointer:
    def __init__(self, address: int):
        self.address = address

    def data_ptr(self) -> int:
        return self.address


def test_direct_launch_reuses_a_compile_only_for_the_same_specialization(monkeypatch):
    from fuser.runtime import direct_launch

    monkeypatch.setattr(direct_launch, "current_device", lambda: 2)
    monkeypatch.setattr(direct_launch, "stream_of", lambda device: 70 + device)
    monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: None)  # Triton's launcher
    jit = _JitFunction()
    launch = DirectLauncher(jit, (7,), {"BLOCK": 128, "num_warps": 4}, pointers=[0], integers=[1])
    aligned, also_aligned, misaligned = _Pointer(4096), _Pointer(8192), _Pointer(4100)
    launch(aligned, 32)  # compiles (Triton's warmup: no launch), then launches directly
    launch(also_aligned, 48)  # same classes: aligned pointer, int divisible by 16 -> direct
    launch(misaligned, 48)  # a new pointer class -> compile
    launch(aligned, 1)  # an int of 1 is a constant in Triton's specialization -> compile
    launch(aligned, 33)  # not divisible by 16 -> compile
    launch(also_aligned, 2**33)  # past 32 bits -> compile
    launch(aligned, 64)  # seen at the second call -> direct
    kinds = [call[0] for call in jit.calls]
    compiled_then_launched = ["compile", "direct"]
    assert kinds == [*compiled_then_launched, "direct", *compiled_then_launched * 4, "direct"]
    assert jit.calls[0] == ("compile", (7,), (aligned, 32), {"BLOCK": 128, "num_warps": 4})
    # direct launches pass every parameter in order, constexprs last, on a three-dimensional grid, on the
    # current device's stream
    assert jit.calls[1] == ("direct", (7, 1, 1), (aligned, 32, 128), 72)
    assert jit.calls[2] == ("direct", (7, 1, 1), (also_aligned, 48, 128), 72)


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


def test_the_lean_runner_calls_the_kernels_launcher_with_the_stream_it_is_given():
    from triton import knobs

    from fuser.runtime import direct_launch

    kernel = _Launcher()
    launch = direct_launch.lean_runner(kernel, (5, 1, 1))
    launch(77, "x", 3)
    # no launch hook registered: no metadata and no hooks, every argument after the grid and stream
    assert kernel.calls == [("run", (5, 1, 1, 77, 0xF00, ("warps", 4), None, None, None, "x", 3))]
    hook = [].append
    knobs.runtime.launch_enter_hook.add(hook)  # a HookChain in Triton 3.6 to 3.9
    try:
        launch(77, "y", 4)
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
    launch(5, "z")
    assert calls == [("direct", (2, 1, 1), ("z",), 5)]


def _kernel() -> SimpleNamespace:
    """Stands in for a compiled kernel: Triton 3.6's signature keyed by name, constants typed."""
    src = SimpleNamespace(
        fn=SimpleNamespace(arg_names=("x_ptr", "n", "one", "BLOCK")),
        signature={"x_ptr": "*fp32", "n": "i32", "one": "constexpr", "BLOCK": "constexpr"},
        constants={},
    )
    group = {"k.json": "/c/k.json", "k.cubin": "/c/k.cubin"}
    return SimpleNamespace(src=src, name="k", metadata_group=group, metadata=SimpleNamespace(num_warps=4))


class _StaticLauncher:
    """Stands in for torch's StaticallyLaunchedCudaKernel: records what it is given, through its `run` or
    its C entry point (with a global scratch parameter, as Triton 3.6's kernels have)."""

    def __init__(self, kernel, calls: list):
        self.arg_tys, self.calls = "Oi", calls
        self.num_warps, self.shared, self.has_global_scratch, self.has_profile_scratch = 4, 0, True, False
        self.function = None
        self.C_impl = SimpleNamespace(_launch_kernel=lambda *args: calls.append(("C", args)))

    def load_kernel(self, device):
        self.calls.append(("load", device))
        self.function = 0xF

    def run(self, *args):
        self.calls.append(("run", args))


def test_the_static_launcher_gets_only_the_parameters_the_compiled_kernel_takes(monkeypatch):
    from fuser.runtime import direct_launch

    assert direct_launch.launched_positions(_kernel()) == [0, 1]  # not the constant 1, not BLOCK
    calls: list = []
    monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: lambda k: _StaticLauncher(k, calls))
    kernel = _kernel()
    launch = direct_launch.static_runner(kernel, (3, 1, 1), 0)
    launch(77, "x", 1000, 1, 256)
    assert kernel._cubin_path == "/c/k.cubin"  # where torch's launcher reads the binary
    # torch's C entry point, as the launcher's `run` calls it: function, grid, warps, shared memory, the
    # argument types with the scratch parameter's, the arguments and a None for it, the stream
    assert calls == [("load", 0), ("C", (0xF, 3, 1, 1, 4, 0, "OiO", ("x", 1000, None), 77))]
    # A second launch of the same compiled kernel (another step, an identical layer) loads no module again.
    direct_launch.static_runner(kernel, (5, 1, 1), 0)(77, "y", 16, 1, 256)
    assert calls[2:] == [("C", (0xF, 5, 1, 1, 4, 0, "OiO", ("y", 16, None), 77))]


def test_static_launch_through_the_launchers_run(monkeypatch):
    """FUSER_STATIC_LAUNCH=run, or a torch whose launcher lacks the fields the C entry point takes, goes
    through the launcher's Python `run`."""
    from fuser.runtime import direct_launch

    calls: list = []
    monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: lambda k: _StaticLauncher(k, calls))
    monkeypatch.setenv("FUSER_STATIC_LAUNCH", "run")
    direct_launch.static_runner(_kernel(), (3, 1, 1), 0)(77, "x", 1000, 1, 256)
    monkeypatch.delenv("FUSER_STATIC_LAUNCH")

    class Older(_StaticLauncher):
        def __init__(self, kernel, calls):
            super().__init__(kernel, calls)
            del self.C_impl  # no C entry point to call

    monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: lambda k: Older(k, calls))
    direct_launch.static_runner(_kernel(), (3, 1, 1), 0)(77, "z", 8, 1, 256)
    assert [c for c in calls if c[0] != "load"] == [
        ("run", (3, 1, 1, 77, "x", 1000)),
        ("run", (3, 1, 1, 77, "z", 8)),
    ]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda k: k.src.signature.update(n="fp16"), "a parameter of type fp16"),
        (lambda k: setattr(k.metadata, "instrumentation_mode", "gsan"), "instrumented"),
        (lambda k: setattr(k.metadata, "launch_pdl", True), "programmatic-dependent"),
    ],
)
def test_a_kernel_torchs_launcher_would_launch_otherwise_keeps_tritons(monkeypatch, caplog, change, reason):
    from fuser.runtime import direct_launch

    calls: list = []
    monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: lambda k: _StaticLauncher(k, calls))
    kernel = _kernel()
    change(kernel)
    with caplog.at_level("INFO", logger="fuser"):
        assert direct_launch.static_runner(kernel, (3, 1, 1), 0) is None
    assert reason in caplog.text and calls == []


def test_a_kernel_the_static_launcher_refuses_is_launched_through_tritons(monkeypatch):
    from fuser.runtime import direct_launch

    def refusing(kernel):
        raise NotImplementedError("We don't support launch enter or launch exit hooks")

    class Compiled(_Compiled):
        src, metadata, metadata_group = _kernel().src, SimpleNamespace(), {"k.cubin": "/c/k.cubin"}

    jit = _JitFunction()
    jit.run = lambda *args, grid, warmup, **options: (
        jit.calls.append(("compile", grid)) or Compiled(jit.calls)
    )
    monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: refusing)
    monkeypatch.setattr(direct_launch, "current_device", lambda: 0)
    monkeypatch.setattr(direct_launch, "stream_of", lambda device: 77)
    DirectLauncher(jit, (7,), {"BLOCK": 128}, pointers=[0], integers=[1])(_Pointer(4096), 32)
    assert [call[:2] for call in jit.calls] == [("compile", (7,)), ("direct", (7, 1, 1))]


def test_a_profiler_registered_after_the_first_launch_gets_its_hooks(monkeypatch):
    from triton import knobs

    from fuser.runtime import direct_launch

    calls: list = []
    monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: lambda k: _StaticLauncher(k, calls))
    through_triton: list = []
    monkeypatch.setattr(direct_launch, "lean_runner", lambda k, grid: lambda *a: through_triton.append(a))
    launch = direct_launch.static_runner(_kernel(), (3, 1, 1), 0)
    hook = [].append
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        launch(77, "x", 1000, 1, 256)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert through_triton == [(77, "x", 1000, 1, 256)] and calls == [("load", 0)]


@pytest.mark.parametrize("route", ["C entry point", "run"])
def test_a_real_kernel_through_torchs_static_launcher(device, monkeypatch, route):
    """On a GPU: a Triton kernel with an integer specialized to the constant 1 and a constexpr, launched
    through torch's static launcher (its C entry point called directly, or its `run`), writes what
    Triton's own launch writes."""
    if device != "cuda":
        pytest.skip("needs FUSER_TEST_DEVICE=cuda (torch's static launcher is CUDA's)")
    if route == "run":
        monkeypatch.setenv("FUSER_STATIC_LAUNCH", "run")
    import triton
    import triton.language as tl

    from fuser.runtime import direct_launch

    @triton.jit
    def axpb(x_ptr, out_ptr, n, a, b, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * a + b, mask=mask)

    assert direct_launch.static_launcher_class() is not None, "this torch has no static CUDA launcher"
    x = torch.randn(1000, device="cuda")
    for a in (1, 3):  # a == 1 is compiled as a constant: the launch must drop it
        out = torch.full_like(x, float("nan"))
        args = (x, out, 1000, a, 5)
        grid = (triton.cdiv(1000, 256), 1, 1)
        kernel = axpb.run(*args, grid=grid, warmup=True, BLOCK=256)
        launch = direct_launch.static_runner(kernel, grid, torch.cuda.current_device())
        assert launch is not None
        launch(torch.cuda.current_stream().cuda_stream, *args, 256)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * a + 5)


def test_on_a_gpu_a_first_call_builds_no_launcher_with_the_c_compiler(device, tmp_path, monkeypatch):
    """With torch's static launcher, Triton's cache gets the kernels' binaries but no C launcher
    (`__triton_launcher*.so`, a gcc run per kernel signature at a first launch); with
    FUSER_STATIC_LAUNCH=0 (Triton's launcher) it gets one, where Triton builds one per signature (3.6;
    3.8 and 3.9 launch through one generic launcher)."""
    if device != "cuda":
        pytest.skip("needs FUSER_TEST_DEVICE=cuda (torch's static launcher is CUDA's)")
    from triton.backends.nvidia import driver

    from fuser.runtime import direct_launch

    if not hasattr(driver, "make_launcher"):
        pytest.skip("this Triton builds no launcher per kernel signature: nothing to avoid")

    def first_call(cache: str, static: bool, shift: float) -> list:
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / cache))
        if not static:
            monkeypatch.setattr(direct_launch, "static_launcher_class", lambda: None)
        x = torch.randn(3, 1000, device="cuda")
        # a shift no other kernel of the process has: its source, so its compile, is new here
        torch.testing.assert_close(fuser.compile(lambda x: x * 3.0 + shift, strict=True)(x), x * 3.0 + shift)
        assert list((tmp_path / cache).rglob("*.cubin")), "nothing compiled into this cache"
        return list((tmp_path / cache).rglob("__triton_launcher*"))

    assert first_call("static", static=True, shift=0.8125) == []
    assert first_call("triton", static=False, shift=0.6875)  # the check can see a launcher built


def test_the_c_entry_call_is_the_one_torchs_launcher_makes(tmp_path, monkeypatch):
    """With this torch's own StaticallyLaunchedCudaKernel over a kernel compiled for sm_90 (on any
    machine: nothing is launched), the direct call of `_launch_kernel` passes what the launcher's `run`
    passes, field for field, scratch parameters included: a torch that changes its call fails here,
    before a GPU would launch a kernel with the old one."""
    from fuser.explain import explain
    from fuser.runtime import direct_launch, gpu_compile_check, kernel_cache

    launcher_class = direct_launch.torch_launcher_class()
    assert launcher_class is not None, "torch 2.11 to 2.13 have a StaticallyLaunchedCudaKernel"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))

    def bias_sigmoid(x, y):
        return torch.sigmoid(x) * y + 1

    (source,) = explain(bias_sigmoid, torch.randn(37, 5), torch.randn(37, 5)).kernels
    jit_fn = kernel_cache.load_file(kernel_cache.kernel_file(source), source.name)
    standins = [torch.empty(16)] * 3 + [185]
    kernel = gpu_compile_check.compile_for_cuda(jit_fn, standins, {"BLOCK": 1024, "num_warps": 4}, 90)
    kernel._cubin_path = next(p for name, p in kernel.metadata_group.items() if name.endswith(".cubin"))
    static = launcher_class(kernel)
    static.function = 0xF  # what load_kernel sets on a GPU
    calls: list = []
    static.C_impl = SimpleNamespace(_launch_kernel=lambda *args: calls.append(args))
    kept = [[0x1000, 0x2000, 0x3000, 185][i] for i in direct_launch.launched_positions(kernel)]
    static.run(3, 1, 1, 77, *kept)
    launch_kernel, fixed, scratch = direct_launch._c_entry(static, (3, 1, 1))
    launch_kernel(*fixed, (*kept, *scratch), 77)
    assert len(calls) == 2 and calls[1] == calls[0], calls
