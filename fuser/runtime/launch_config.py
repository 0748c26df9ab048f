"""Launch configuration: the block sizes, grid and warps a kernel is launched with, chosen from its sizes.

The settings are module constants, read at each choice, so a benchmark or a test can sweep them
(`setattr(launch_config, "GPU_BLOCK", 256)`) without touching the code that reads them.
"""

from __future__ import annotations

import functools
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import triton

if TYPE_CHECKING:
    from fuser.emit.codegen import KernelSource

GPU_BLOCK, GPU_WARPS = 1024, 4  # pointwise kernels
# A pointwise kernel that reads an operand at another index than its flat offset (a broadcast bias, a
# transposed input: `ir.Address.strided`) makes that index with an integer division once a thread, and ptxas issues the thread's
# loads after it: twice the elements a thread halve its cost. On the H200 (records/gpu-h200-2026-12-03-s28.md)
# bias + tanh-gelu took 0.0702 ms at 2048 against 0.0753 at 1024 and 0.0684 at 4096, bias + gelu 0.140
# against 0.157 and 0.153; swiglu, whose loads are all flat, was slower at either (0.0933, 0.0939 vs 0.0927).
GPU_INDEXED_BLOCK, GPU_INDEXED_WARPS = 2048, 4
# ... but only over this many elements or more: a smaller kernel is bound by its launch, and twice the
# elements a thread double the code Triton and ptxas compile (llama's rotary-embedding kernels, sin and cos
# of 16 elements a thread: its first call's CUDA compiles took 11.80 s serially against 6.99 at 1024, the
# median of 3 processes of tools/probes/kernel_compiles_for_gpu.py; an H100's first call 11.8 s against
# Inductor's 8.1).
GPU_INDEXED_MIN_NUMEL = 1 << 20
GPU_PERSISTENT_MAX = 8192  # the longest row a GPU row kernel holds in one block
GPU_ROW_ELEMENTS = 4096  # elements per block of a persistent row kernel (XBLOCK rows of RBLOCK)
# Columns per iteration of a looped row kernel (a row longer than GPU_PERSISTENT_MAX) that only reduces its
# rows, of one that writes rows too, and of a split reduction's first stage (its splits are whole multiples
# of it). On the H200 (records/gpu-h200-2026-11-29-s25.md), 8192 columns on 4 warps rather than 2048 took
# cross-entropy's forward kernel from 181 to 161 us, and its backward's (which writes the gradient's rows)
# from 446 to 507 us.
GPU_LOOP_RBLOCK, GPU_LOOP_WRITE_RBLOCK, GPU_SPLIT_RBLOCK = 8192, 2048, 2048
GPU_LOOP_STAGES = 0  # software-pipelining stages of a looped row kernel's loop (0: Triton's default)
GPU_OUTER_XBLOCK, GPU_OUTER_RBLOCK = 64, 32  # reductions over outer (strided) dims
# Split a reduction in two stages when its rows give fewer programs than this and its rows are long.
SPLIT_BELOW_PROGRAMS, SPLIT_MIN_COLS, SPLIT_TARGET_PROGRAMS, MAX_SPLITS = 256, 8192, 1024, 256
# A kernel summing its columns too (`fuser.plan.partition.attach_column_sums`) runs this many groups of rows at
# most: each group's sums are a row of partial sums that a second launch adds up.
GPU_ROW_GROUPS, CPU_ROW_GROUPS = 256, 4
# Its blocks on a GPU: elements per block (whole rows), elements per warp and at most this many warps, apart
# from the persistent kernels' settings. On an H200 (records/fast-paths-h200-2026-11-28-s17.md) a layer norm
# backward's kernel took 166 us at 8 or 16 warps, add + layer norm's 211 us at 8 and 336 at 16; 2 rows a
# block, more or fewer groups were no faster.
GPU_GROUP_ROW_ELEMENTS, GPU_GROUP_ELEMENTS_PER_WARP, GPU_GROUP_MAX_WARPS = 4096, 512, 8
# A row kernel gets one warp per this many elements it holds of its whole-tensor inputs (4 to 16 warps).
# On the H200 (records/gpu-h200-2026-11-29-s25.md), 2048 rather than 512: softmax's 4096-column rows on
# 4 warps rather than 8 took 73 rather than 79 us (the sweep before found 512 faster than 256:
# docs/gpu-runs.md).
GPU_ELEMENTS_PER_WARP = 2048
# The interpreter runs each program in Python: few large blocks beat many small ones.
CPU_MAX_BLOCK = 2**14
# Elements a row kernel's program holds (XBLOCK rows of a whole row) under the interpreter: its Python
# overhead is per program, so short rows go many to a program (the rows that fit one block are still
# those of CPU_MAX_BLOCK: a longer row is looped, as the conformance suite's long rows check).
CPU_ROW_ELEMENTS = 2**16


@functools.cache
def gpu_compile_options() -> dict[str, Any]:
    """Triton compile options for every GPU launch, where the backend has them (NVIDIA's, Triton 3.6 to 3.9):
    - `enable_reflect_ftz=False`: Triton links libdevice flushing float32 subnormals to zero by default;
      eager's CUDA kernels keep them. Measured on the H100: it cost nothing (docs/gpu-runs.md).
    - `enable_fp_fusion=True`: multiplies and adds contracted into FMAs, as nvcc compiles eager's kernels
      and as every kernel was validated; Triton 3.9 warns that its default turns to False in 3.10, which
      would change the fuser's answers silently. TRITON_FORCE_DISABLE_FP_FUSION still turns it off."""
    if torch.version.hip is not None:
        return {}
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return {}
    wanted = {"enable_reflect_ftz": False, "enable_fp_fusion": True}
    return {name: value for name, value in wanted.items() if name in CUDAOptions.__dataclass_fields__}


def launch_options(blocks: dict[str, int], warps: int, interpreted: bool, stages: int = 0) -> dict[str, Any]:
    """A launch's keyword arguments: its block sizes and, on a GPU, its warps, stages and compile options."""
    if interpreted:
        return dict(blocks)
    return {
        **blocks,
        "num_warps": warps,
        **({"num_stages": stages} if stages else {}),
        **gpu_compile_options(),
    }


def pointwise_options(block: int, interpreted: bool) -> dict[str, Any]:
    """A pointwise or horizontal kernel's launch options for blocks of `block` elements."""
    return launch_options({"BLOCK": block}, GPU_WARPS, interpreted)


@dataclass(frozen=True)
class Config:
    """Which variant to launch, with which block sizes, grid and warps (and a second stage if split)."""

    variant: int
    blocks: dict[str, int]
    grid: tuple[int, ...]
    warps: int
    _: KW_ONLY  # the rest by name: positions shift when a field is added
    ints: dict[str, int] = field(default_factory=dict)  # per-launch integer arguments (split sizes)
    then: Config | None = None  # a split reduction's second stage
    workspace: tuple[int, int] | None = None  # the shape of each partial-results workspace, if any
    stages: int = 0  # software-pipelining stages (0: Triton's default)


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(n, 1))


def pointwise_block(numel: int, interpreted: bool) -> int:
    """The elements per program of a pointwise kernel over `numel` (or a horizontal one's largest part)."""
    return min(CPU_MAX_BLOCK, _pow2(numel)) if interpreted else GPU_BLOCK


def choose_config(variants: list[KernelSource], ints: dict[str, int], interpreted: bool) -> Config:
    """Block sizes from the sizes: a persistent row kernel when a row fits one block, else looped,
    and a split into two stages when too few rows would leave most of the GPU idle on long rows."""
    if variants[0].kind == "pointwise":
        numel = ints["numel"]
        block, warps = pointwise_block(numel, interpreted), GPU_WARPS
        strided = any(access.address.strided for access in variants[0].accesses)
        if not interpreted and strided and numel >= GPU_INDEXED_MIN_NUMEL:
            block, warps = GPU_INDEXED_BLOCK, GPU_INDEXED_WARPS
        return Config(0, {"BLOCK": block}, (triton.cdiv(numel, block),), warps)
    rows, cols = ints["num_rows"], ints["num_cols"]
    whole_row = _pow2(cols)
    if variants[0].kind == "row_groups":
        return _row_groups_config(rows, cols, variants[0].row_inputs, interpreted)
    if interpreted:
        persistent, rblock = whole_row <= CPU_MAX_BLOCK, CPU_MAX_BLOCK // 4
        xblock = min(_pow2(rows), max(1, CPU_ROW_ELEMENTS // (whole_row if persistent else rblock)))
    elif variants[0].contiguous_rows:
        persistent = whole_row <= GPU_PERSISTENT_MAX
        rblock = GPU_LOOP_WRITE_RBLOCK if variants[0].row_outputs else GPU_LOOP_RBLOCK
        xblock = min(_pow2(rows), max(1, GPU_ROW_ELEMENTS // whole_row)) if persistent else 1
    else:
        persistent, rblock = whole_row <= GPU_OUTER_RBLOCK, GPU_OUTER_RBLOCK
        xblock = min(_pow2(rows), GPU_OUTER_XBLOCK)
    programs = triton.cdiv(rows, xblock)
    split = (
        len(variants) > 2
        and not persistent
        and 0 < programs < SPLIT_BELOW_PROGRAMS
        and cols >= SPLIT_MIN_COLS
    )
    rblock = whole_row if persistent else GPU_SPLIT_RBLOCK if split else rblock
    held = xblock * rblock
    if persistent and variants[0].contiguous_rows:
        held *= max(1, variants[0].row_inputs)
    warps = min(16, max(4, _pow2(held // GPU_ELEMENTS_PER_WARP)))  # Triton takes powers of two
    if split:
        splits = max(2, min(MAX_SPLITS, SPLIT_TARGET_PROGRAMS // programs, triton.cdiv(cols, rblock)))
        split_size = triton.cdiv(triton.cdiv(cols, splits), rblock) * rblock
        splits = triton.cdiv(cols, split_size)
        combine_x = min(_pow2(rows), max(1, 4096 // _pow2(splits)))
        second = Config(
            3,
            {"XBLOCK": combine_x, "RBLOCK": _pow2(splits)},
            (triton.cdiv(rows, combine_x),),
            4,
            ints={"num_splits": splits},
        )
        return Config(
            2,
            {"XBLOCK": xblock, "RBLOCK": rblock},
            (programs, splits),
            warps,
            ints={"split_size": split_size},
            then=second,
            workspace=(splits, rows),
        )
    stages = 0 if persistent or interpreted else GPU_LOOP_STAGES
    return Config(
        0 if persistent else 1, {"XBLOCK": xblock, "RBLOCK": rblock}, (programs,), warps, stages=stages
    )


def _row_groups_config(rows: int, cols: int, row_inputs: int, interpreted: bool) -> Config:
    """A kernel summing its columns too: whole rows per block (the partitioner keeps its rows short enough),
    in at most *_ROW_GROUPS groups; then its column kernel's "split_combine" adds the groups' sums."""
    whole_row = _pow2(cols)
    if whole_row > (CPU_MAX_BLOCK if interpreted else GPU_PERSISTENT_MAX):
        raise ValueError(f"a row of {cols} columns does not fit one block of a kernel summing its columns")
    elements = CPU_ROW_ELEMENTS if interpreted else GPU_GROUP_ROW_ELEMENTS
    xblock = min(_pow2(rows), max(1, elements // whole_row))
    groups = max(1, min(triton.cdiv(rows, xblock), CPU_ROW_GROUPS if interpreted else GPU_ROW_GROUPS))
    held = xblock * whole_row * max(1, row_inputs)
    warps = min(GPU_GROUP_MAX_WARPS, max(4, _pow2(held // GPU_GROUP_ELEMENTS_PER_WARP)))
    combine_x = min(whole_row, max(1, 4096 // _pow2(groups)))
    adds = Config(1, {"XBLOCK": combine_x, "RBLOCK": _pow2(groups)}, (triton.cdiv(cols, combine_x),), 4,
                  ints={"num_splits": groups})  # fmt: skip
    return Config(
        0,
        {"XBLOCK": xblock, "RBLOCK": whole_row},
        (groups,),
        warps,
        ints={"num_groups": groups},
        then=adds,
        workspace=(groups, cols),
    )
