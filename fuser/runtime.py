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
import inspect
import logging
import os
import tempfile
import types
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy
import torch
import triton
from torch import fx

from fuser import gpu_compile_check, interpreter_bf16, interpreter_libdevice, interpreter_reduce, metrics
from fuser.codegen import KernelSource, output_strides
from fuser.direct_launch import DirectLauncher
from fuser.partition import Kernel
from fuser.shapes import SizeBinder, concrete

log = logging.getLogger("fuser")

# Launch configurations. Module constants, so a benchmark can sweep them.
GPU_BLOCK, GPU_WARPS = 1024, 4  # pointwise kernels
GPU_PERSISTENT_MAX = 8192  # the longest row a GPU row kernel holds in one block
GPU_ROW_ELEMENTS = 4096  # elements per block of a persistent row kernel (XBLOCK rows of RBLOCK)
GPU_LOOP_RBLOCK = 2048  # columns per iteration of a looped row kernel
GPU_OUTER_XBLOCK, GPU_OUTER_RBLOCK = 64, 32  # reductions over outer (strided) dims
# Split a reduction in two stages when its rows give fewer programs than this and its rows are long.
SPLIT_BELOW_PROGRAMS, SPLIT_MIN_COLS, SPLIT_TARGET_PROGRAMS, MAX_SPLITS = 256, 8192, 1024, 256
# A row kernel gets one warp per this many elements it holds of its whole-tensor inputs (4 to 16 warps):
# on the H100, softmax and rms_norm (one such input) ran fastest at 8 warps a 4096-row, add + layer_norm
# (two) at 16 (docs/gpu-runs.md).
GPU_ELEMENTS_PER_WARP = 512
# The interpreter runs each program in Python: few large blocks beat many small ones.
CPU_MAX_BLOCK = 2**14
# Elements a row kernel's program holds (XBLOCK rows of a whole row) under the interpreter: its Python
# overhead is per program, so short rows go many to a program (the rows that fit one block are still
# those of CPU_MAX_BLOCK: a longer row is looped, as the conformance suite's long rows check).
CPU_ROW_ELEMENTS = 2**16


@functools.cache
def gpu_compile_options() -> dict[str, Any]:
    """Triton compile options for every GPU launch. Triton links libdevice flushing float32 subnormals to
    zero by default (`enable_reflect_ftz`); eager's CUDA kernels keep them, so the fuser turns that off
    where the backend has the option (NVIDIA's, Triton 3.6 to 3.9). Measured on the H100: it cost nothing
    (docs/gpu-runs.md)."""
    if torch.version.hip is not None:
        return {}
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return {}
    return {"enable_reflect_ftz": False} if "enable_reflect_ftz" in CUDAOptions.__dataclass_fields__ else {}


@functools.cache
def _kernel_dir() -> Path:
    """Where generated kernels are written: FUSER_KERNEL_DIR if set, else one folder per user shared by
    every process and run (a kernel's file is named by the hash of its body, so equal kernels share a
    file; a folder per process left thousands of files behind, issue 14)."""
    chosen = Path(
        os.environ.get("FUSER_KERNEL_DIR") or Path(tempfile.gettempdir()) / f"fuser-kernels-{os.getuid()}"
    )
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


def _load_module(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"fuser_generated.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _PlainFunction:
    """A helper called directly under the interpreter; `.fn` is what tl.reduce's interpreter calls."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


@functools.cache
def _interpreter_lib() -> types.ModuleType:
    """A copy of fuser.kernel_lib whose helpers are plain functions calling NumPy libdevice."""
    from fuser import kernel_lib

    module = _load_module(Path(kernel_lib.__file__))
    module.libdevice = interpreter_libdevice
    for name, value in vars(module).items():
        if isinstance(value, triton.runtime.JITFunction):
            setattr(module, name, _PlainFunction(value.fn))
    # The interpreter folds a row left to right through a combine function (slow, and a long float
    # row loses precision), except for its own sum's combine, which it hands to NumPy's pairwise sum.
    module.add = triton.language.standard._sum_combine
    # And the interpreter calls any other combine function once per element: the fuser's get NumPy twins.
    interpreter_reduce.install()
    _drop_dead_overflow_checks()
    _index_by_squeezing()
    for name in ("maximum_nan", "minimum_nan", "maximum", "minimum", "multiply"):
        getattr(module, name).numpy_reduce = getattr(interpreter_reduce, name)
    module.argmax_combine.numpy_reduce = interpreter_reduce.argmax
    module.argmin_combine.numpy_reduce = interpreter_reduce.argmin
    module.widen_bf16 = interpreter_bf16.widen_bf16
    module.narrow_bf16 = interpreter_bf16.narrow_bf16
    return module


def _drop_dead_overflow_checks() -> None:
    """Triton's interpreter wraps every int32 add, sub and mul (index arithmetic, mostly) in an int64
    overflow check (`sanitize_overflow`, on by default) and then drops its result: the check's
    device_assert does nothing unless the options' `debug` is on, and the interpreter never turns it on.
    Computing that dead check was half the interpreter's time on the conformance full tier's largest
    samples (docs/validation.md, "Where validation's time goes"). With `debug` on it stays."""
    from triton.runtime import interpreter

    options = interpreter.interpreter_builder.options
    if not options.debug:
        interpreter.interpreter_builder.options = replace(options, sanitize_overflow=False)


def _index_by_squeezing() -> None:
    """Triton 3.6's interpreter holds a kernel's int argument as a one-element array and turns it into a
    loop bound (`range(0, num_cols, RBLOCK)`) with `int(array)`, which NumPy 2.4 refuses for an array of
    one dimension: every looped and split row kernel raised under Triton 3.6 (found validating the cpu
    manifest on the lent machine's cores, 2026-11-27). Triton 3.9 squeezes the array first; do as it does."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "fuser_squeezes_index", False) or "squeeze()" in inspect.getsource(original):
        return  # patched already, or a Triton that squeezes (3.9): nothing to add to every launch

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patch_lang_tensor.fuser_squeezes_index = True
    interpreter._patch_lang_tensor = patch_lang_tensor


_kernels: dict[tuple[str, bool], Callable] = {}


def load_kernel(source: KernelSource, interpreted: bool, counted: bool = True) -> Callable:
    """The launchable kernel for `source`: loaded once per cache key and mode (each load is counted,
    except the GPU builds FUSER_CHECK_CUDA_COMPILE only compiles, which never run)."""
    key = (source.cache_key, interpreted)
    if key not in _kernels:
        _kernels[key] = _load_kernel(source, interpreted)
        if counted:
            metrics.bump("kernels_compiled")
    return _kernels[key]


def _load_kernel(source: KernelSource, interpreted: bool) -> Callable:
    path = _kernel_dir() / f"{source.name}_{source.cache_key[:32]}.py"
    if not path.exists():  # written by another process or run: the same body (its header may differ)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(source.source)
        partial.replace(path)  # atomic: a concurrent reader sees the whole file or none
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


@dataclass(frozen=True)
class Config:
    """Which variant to launch, with which block sizes, grid and warps (and a second stage if split)."""

    variant: int
    blocks: dict[str, int]
    grid: tuple[int, ...]
    warps: int
    ints: dict[str, int] = field(default_factory=dict)  # per-launch integer arguments (split sizes)
    then: Config | None = None  # a split reduction's second stage


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(n, 1))


def choose_config(variants: list[KernelSource], ints: dict[str, int], interpreted: bool) -> Config:
    """Block sizes from the sizes: a persistent row kernel when a row fits one block, else looped,
    and a split into two stages when too few rows would leave most of the GPU idle on long rows."""
    if variants[0].kind == "pointwise":
        numel = ints["numel"]
        block = min(CPU_MAX_BLOCK, _pow2(numel)) if interpreted else GPU_BLOCK
        return Config(0, {"BLOCK": block}, (triton.cdiv(numel, block),), GPU_WARPS)
    rows, cols = ints["num_rows"], ints["num_cols"]
    whole_row = _pow2(cols)
    if interpreted:
        persistent, rblock = whole_row <= CPU_MAX_BLOCK, CPU_MAX_BLOCK // 4
        xblock = min(_pow2(rows), max(1, CPU_ROW_ELEMENTS // (whole_row if persistent else rblock)))
    elif variants[0].contiguous_rows:
        persistent, rblock = whole_row <= GPU_PERSISTENT_MAX, GPU_LOOP_RBLOCK
        xblock = min(_pow2(rows), max(1, GPU_ROW_ELEMENTS // whole_row)) if persistent else 1
    else:
        persistent, rblock = whole_row <= GPU_OUTER_RBLOCK, GPU_OUTER_RBLOCK
        xblock = min(_pow2(rows), GPU_OUTER_XBLOCK)
    rblock = whole_row if persistent else rblock
    held = xblock * rblock
    if persistent and variants[0].contiguous_rows:
        held *= max(1, variants[0].row_inputs)
    warps = min(16, max(4, _pow2(held // GPU_ELEMENTS_PER_WARP)))  # Triton takes powers of two
    programs = triton.cdiv(rows, xblock)
    if (
        len(variants) > 2
        and not persistent
        and 0 < programs < SPLIT_BELOW_PROGRAMS
        and cols >= SPLIT_MIN_COLS
    ):
        splits = max(2, min(MAX_SPLITS, SPLIT_TARGET_PROGRAMS // programs, triton.cdiv(cols, rblock)))
        split_size = triton.cdiv(triton.cdiv(cols, splits), rblock) * rblock
        splits = triton.cdiv(cols, split_size)
        combine_x = min(_pow2(rows), max(1, 4096 // _pow2(splits)))
        second = Config(
            3,
            {"XBLOCK": combine_x, "RBLOCK": _pow2(splits)},
            (triton.cdiv(rows, combine_x),),
            4,
            {"num_splits": splits},
        )
        return Config(
            2,
            {"XBLOCK": xblock, "RBLOCK": rblock},
            (programs, splits),
            warps,
            {"split_size": split_size},
            second,
        )
    return Config(0 if persistent else 1, {"XBLOCK": xblock, "RBLOCK": rblock}, (programs,), warps)


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


def sized_as_planned(made_eagerly: list[tuple[int, tuple[int, ...]]], env: list, kernel: str) -> bool:
    """Whether the inputs eager steps made this call have the sizes the kernel was planned for; where
    one does not (its size depends on data the tracer did not see), logs it: the caller runs the
    kernel's nodes eagerly for this call."""
    for slot, planned in made_eagerly:
        if env[slot].shape != planned:
            log.info(
                "fuser: kernel %s was planned for an input of size %s, which an eager step made %s at "
                "run time; its nodes run eagerly for this call",
                kernel,
                list(planned),
                list(env[slot].shape),
            )
            metrics.bump("fallbacks")
            return False
    return True


@dataclass
class KernelStep:
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
        # Per output: the env slot of the graph input it is written into in place (`fuser.inplace`).
        self.into_slots = [self.slots[self.into[m]] if m in self.into else None for m in self.kernel.members]
        self.flat_inputs = [self.slots[node] for node in self.variants[0].flat_inputs]
        self.launches: dict[tuple[int, ...], Launch] = {}
        self.gpu_launches: dict[tuple[int, ...], Launch] = {}
        # FUSER_CHECK_CUDA_COMPILE's capability, read once: interpreted launches also compile for it.
        self.check_capability = gpu_compile_check.target_capability() if self.interpreted else None
        self.failed = False

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
        empty = ints.get("numel", ints.get("num_rows", 1)) == 0
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
        options = (
            dict(config.blocks)
            if interpreted
            else {**config.blocks, "num_warps": config.warps, **gpu_compile_options()}
        )
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

    def __call__(self, env: list, key: tuple[int, ...]) -> None:
        if self.failed:
            self.fallback(env, key)
            return
        launch = self.launch(key)
        if launch.made_eagerly and not sized_as_planned(launch.made_eagerly, env, self.variants[0].name):
            self.fallback(env, key)
            return
        device = self.kernel.device
        outputs = self.outputs(launch, env)
        if launch.empty:
            return
        for slot in self.flat_inputs:
            if not env[slot].is_contiguous():
                raise RuntimeError(
                    f"fuser: kernel {self.variants[0].name} was generated for a contiguous input but got "
                    f"strides {env[slot].stride()}; this is a bug in the fuser's layout tracking"
                )
        partials = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in launch.partials]
        stage = launch.stages[0]
        try:
            if self.check_capability is not None:
                self._check_gpu_compile(key, env, outputs, self.check_capability)
            for stage in launch.stages:
                if stage.launcher is None:
                    stage.launcher = self._launcher(stage)
                stage.launcher(*stage.arguments(env, outputs, partials))
            metrics.bump("kernels_launched", len(launch.stages))
        except Exception as error:
            if self.strict:
                raise
            log.warning(
                "fuser: kernel %s failed (%s: %s); running its nodes eagerly",
                stage.source.name,
                type(error).__name__,
                error,
            )
            metrics.bump("fallbacks")
            self.failed = True
            self.fallback(env, key)

    def outputs(self, launch: Launch, env: list) -> list[torch.Tensor]:
        """The tensors the kernel stores into, set in env: fresh ones, or the graph inputs it writes."""
        outputs = []
        for (shape, strides, dtype, slot), into in zip(launch.outputs, self.into_slots, strict=True):
            out = (
                torch.empty_strided(shape, strides, dtype=dtype, device=self.kernel.device)
                if into is None
                else env[into]
            )
            env[slot] = out
            outputs.append(out)
        return outputs

    def _check_gpu_compile(self, key: tuple[int, ...], env: list, outputs: list, capability: int) -> None:
        """Compile, for CUDA, the stages a GPU would launch for these arguments (the CPU tensors stand in
        for the GPU's: same dtypes, sizes and strides)."""
        launch = self.gpu_launch(key)
        partials = [torch.empty(shape, dtype=dtype) for shape, dtype in launch.partials]
        for stage in launch.stages:
            jit_fn = load_kernel(stage.source, interpreted=False, counted=False)
            gpu_compile_check.compile_for_cuda(
                jit_fn, stage.arguments(env, outputs, partials), stage.options, capability
            )

    def _launcher(self, stage: Stage) -> Callable:
        kernel = load_kernel(stage.source, self.interpreted)
        if self.interpreted:
            return _quietly(kernel[stage.grid], stage.options)
        pointers = [p for p, _ in stage.tensors + stage.outputs + stage.partials]
        integers = [p for p, _, _ in stage.strides]
        return DirectLauncher(kernel, stage.grid, stage.options, pointers, integers)

    def _partials(self, config: Config, ints: dict[str, int]) -> list[tuple[tuple[int, int], torch.dtype]]:
        """Workspaces for a split reduction's partial results: one (splits × rows) tensor each."""
        if config.then is None:
            return []
        splits, rows = config.grid[1], ints["num_rows"]
        specs = sorted(
            (arg.index, arg.dtype)
            for _, arg in self.variants[config.variant].params
            if arg.kind == "partials"
        )
        return [((splits, rows), dtype) for _, dtype in specs]


def _quietly(launch: Callable, options: dict[str, Any]) -> Callable:
    """An interpreted launch with its block sizes bound. Masked-off lanes may divide by zero: NumPy would
    warn about values nobody stores."""

    def run(*args: Any) -> None:
        with numpy.errstate(divide="ignore", invalid="ignore", over="ignore"):
            launch(*args, **options)

    return run


def _materialize(arg: Any, env: list, slots: dict[fx.Node, int]) -> Any:
    return fx.node.map_arg(arg, lambda n: env[slots[n]])


@dataclass
class EagerStep:
    """An aten call made eagerly (an op the fuser does not lower, a view, a getitem)."""

    node: fx.Node
    slots: dict[fx.Node, int]
    counted: bool  # views and getitems are bookkeeping, not extern calls
    traced_dtypes: tuple = field(init=False)

    def __post_init__(self) -> None:
        value = self.node.meta.get("val")
        values = value if isinstance(value, (tuple, list)) else (value,)
        self.traced_dtypes = tuple(v.dtype if isinstance(v, torch.Tensor) else None for v in values)

    def __call__(self, env: list, key: tuple[int, ...] = ()) -> None:
        args = _materialize(self.node.args, env, self.slots)
        kwargs = _materialize(self.node.kwargs, env, self.slots)
        result = self.node.target(*args, **kwargs)
        if self.counted:
            # One attribute read for a single tensor; tuples are checked element by element.
            if (
                isinstance(result, (tuple, list))
                or getattr(result, "dtype", None) is not self.traced_dtypes[0]
            ):
                result = self._as_traced(result)
            metrics.bump("extern_calls")
        env[self.slots[self.node]] = result

    def _as_traced(self, result: Any) -> Any:
        # Kernels downstream were generated for the dtypes the graph was traced with. Where an op's eager
        # kernel disagrees with its meta kernel (CPU batch norm on bfloat16 saves float32 statistics; its
        # meta says bfloat16), a kernel would read the bytes as the wrong type: convert to the traced dtype.
        results = result if isinstance(result, (tuple, list)) else (result,)
        pairs = list(zip(results, self.traced_dtypes, strict=False))  # a tuple may carry non-tensors too
        if all(traced is None or not isinstance(r, torch.Tensor) or r.dtype is traced for r, traced in pairs):
            return result
        log.info("%s returned %s where it was traced as %s; converted", self.node.target,
                 [getattr(r, "dtype", None) for r in results], list(self.traced_dtypes))  # fmt: skip
        converted = [r.to(t) if isinstance(r, torch.Tensor) and t is not None else r for r, t in pairs]
        return type(result)(converted) if isinstance(result, (tuple, list)) else converted[0]


class CompiledGraph:
    """The callable AOTAutograd gets back: boxed arguments in, a list of outputs out."""

    _boxed_call = True

    def __init__(
        self,
        graph_module: fx.GraphModule,
        steps: list,
        slots: dict[fx.Node, int],
        frees: list[list[int]],
        binder: SizeBinder,
    ):
        self.graph_module = graph_module
        self.steps = steps
        self.slots = slots
        self.frees = frees
        self.binder = binder
        graph = graph_module.graph
        self.placeholders = [slots[n] for n in graph.nodes if n.op == "placeholder"]
        self.leading = self.placeholders == list(range(len(self.placeholders)))
        self.attributes = [
            (slots[n], _fetch_attr(graph_module, n.target)) for n in graph.nodes if n.op == "get_attr"
        ]
        (output,) = [n for n in graph.nodes if n.op == "output"]
        self.output_spec = output.args[0]

    def __call__(self, args: list) -> Any:
        key = self.binder.key(args)
        if self.leading:  # the usual graph: the inputs hold the first slots (an optimizer's: a thousand)
            env = list(args)
            env.extend([None] * (len(self.slots) - len(env)))
        else:
            env = [None] * len(self.slots)
            for slot, value in zip(self.placeholders, args, strict=True):
                env[slot] = value
        args.clear()  # the boxed calling convention: let inputs be freed as soon as possible
        for slot, value in self.attributes:
            env[slot] = value
        for step, frees in zip(self.steps, self.frees, strict=True):
            step(env, key)
            for slot in frees:
                env[slot] = None
        return list(_materialize(self.output_spec, env, self.slots))

    def device_tables(self) -> list[torch.Tensor]:
        """The device tensors its horizontal launches read besides env: what a CUDA graph of this
        graph's launches (`fuser.cuda_graphs`) must keep alive."""
        return [
            tensor
            for step in self.steps
            if isinstance(step, HorizontalStep)
            for launch in step.launches.values()
            for tensor in (launch.table, launch.programs)
            if tensor is not None
        ]


class CompiledBackwardGraph(CompiledGraph):
    """A backward graph: autograd may run it from inside a function Dynamo is compiling (one that calls
    backward()), where Dynamo would try to trace the runtime itself. Forward graphs are called from
    Dynamo's own compiled code and skip this guard, which costs several microseconds a call."""

    @torch.compiler.disable
    def __call__(self, args: list) -> Any:
        return super().__call__(args)


def _fetch_attr(module: torch.nn.Module, target: str) -> Any:
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


class GraphCaptureError(RuntimeError):
    """A step that cannot be captured in a CUDA graph as it stands (`fuser.cuda_graphs`)."""


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
    table: torch.Tensor | None = None  # the last call's table, on the device
    values: list[int] | None = None  # the read values it holds


class HorizontalStep:
    """Launches a horizontal kernel (`fuser.horizontal`): one table row per part, from the part's
    arguments (addresses of its tensors, its integers), so any number of parts of any sizes share the
    one compiled kernel. The table is rebuilt only when a value in it changed since the last call."""

    def __init__(self, source: KernelSource, parts: list[KernelStep], strict: bool):
        self.source = source
        self.parts = parts
        self.strict = strict
        self.device = parts[0].kernel.device
        self.interpreted = self.device.type == "cpu"
        # Env slots read at the flat offset, by any part: they must be contiguous.
        self.flat_inputs = [slot for part in parts for slot in part.flat_inputs]
        self.launches: dict[tuple[int, ...], HorizontalLaunch] = {}
        self.failed = False
        self.check_capability = gpu_compile_check.target_capability() if self.interpreted else None

    def launch(self, key: tuple[int, ...]) -> HorizontalLaunch:
        if key not in self.launches:
            parts = [part.launch(key) for part in self.parts]
            numels = [
                0 if launch.empty else launch.stages[0].template[_numel_position(part)]
                for part, launch in zip(self.parts, parts, strict=True)
            ]
            biggest = max(numels)
            block = min(CPU_MAX_BLOCK, _pow2(biggest)) if self.interpreted else GPU_BLOCK
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

    def __call__(self, env: list, key: tuple[int, ...]) -> None:
        if self.failed:
            self._fallback(env, key)
            return
        launch = self.launch(key)
        if launch.made_eagerly and not sized_as_planned(launch.made_eagerly, env, self.source.name):
            self._fallback(env, key)
            return
        # A step of 200 parameters reads a thousand addresses a call: the loops below run in C (map)
        # because Python-level loops over them cost more host time than the kernel takes on a GPU.
        deque(map(env.__setitem__, launch.alias_slots, map(env.__getitem__, launch.alias_intos)), maxlen=0)
        for slot, shape, strides, dtype in launch.fresh:
            env[slot] = torch.empty_strided(shape, strides, dtype=dtype, device=self.device)
        if not all(map(torch.Tensor.is_contiguous, map(env.__getitem__, self.flat_inputs))):
            strided = next(env[slot] for slot in self.flat_inputs if not env[slot].is_contiguous())
            raise RuntimeError(
                f"fuser: kernel {self.source.name} was generated for a contiguous input but got "
                f"strides {strided.stride()}; this is a bug in the fuser's layout tracking"
            )
        if launch.programs is None:
            return
        try:
            values = list(map(torch.Tensor.data_ptr, map(env.__getitem__, launch.addresses)))
            values += [env[slot].stride(dim) for slot, dim in launch.strides]
            if values != launch.values:
                if not self.interpreted and torch.cuda.is_current_stream_capturing():
                    # A CUDA graph would replay this copy from a host buffer freed after the call.
                    raise GraphCaptureError(f"{self.source.name}'s table would change during a capture")
                table = launch.constants.clone()
                table[launch.positions] = torch.tensor(values, dtype=torch.int64)[launch.expand]
                if not self.interpreted:
                    table = table.pin_memory().to(self.device, non_blocking=True)
                launch.table, launch.values = table, values
            if launch.launcher is None:
                if self.check_capability is not None:  # FUSER_CHECK_CUDA_COMPILE: as KernelStep does
                    jit_fn = load_kernel(self.source, interpreted=False, counted=False)
                    gpu_compile_check.compile_for_cuda(
                        jit_fn,
                        [launch.table, launch.programs],
                        _gpu_options(GPU_BLOCK),
                        self.check_capability,
                    )
                launch.launcher = self._launcher(launch)
            launch.launcher(launch.table, launch.programs)
            metrics.bump("kernels_launched")
        except GraphCaptureError:
            raise
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
            self._fallback(env, key)

    def _launcher(self, launch: HorizontalLaunch) -> Callable:
        kernel = load_kernel(self.source, self.interpreted)
        grid = (len(launch.programs),)
        if self.interpreted:
            return _quietly(kernel[grid], {"BLOCK": launch.block})
        return functools.partial(kernel[grid], **_gpu_options(launch.block))

    def _fallback(self, env: list, key: tuple[int, ...]) -> None:
        for part in self.parts:
            part.fallback(env, key)


def _gpu_options(block: int) -> dict[str, Any]:
    """A horizontal kernel's launch options on a GPU (its block, warps and compile options)."""
    return {"BLOCK": block, "num_warps": GPU_WARPS, **gpu_compile_options()}


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
