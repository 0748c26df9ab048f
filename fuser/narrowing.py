"""Kernels whose float32 arithmetic on half values LLVM would narrow wrongly on CUDA.

The fuser computes half-precision values in float32, as ATen's kernels do, and writes each widening as a
conversion. The LLVM inside Triton (3.6 on the lent H200; 3.9's too, in its PTX) narrows some float32
operations on widened halves back to half precision (tools/gpu/half_mixed_ptx.py, docs/gpu-runs.md):

- `float16(float32(a) * float32(b))` for a float16 `a` and a bfloat16 `b` becomes a float16 multiply of
  `b` rounded to float16: a bfloat16 2**-126 becomes 0, and inf times it nan (eager: inf);
- `float32(x) >= 0.1` for a float16 `x` becomes a float16 comparison with 0.1 rounded to nearest
  (0.09998), true for x = float16(0.1) (eager: false).

Both are sound only where every operand is exact in the narrow type: one half type throughout, and
constants it holds exactly. A kernel that holds both half types, or compares against a float constant one
of its half types cannot hold, widens through `lib.widen_opaque`, which LLVM cannot see into, so its
arithmetic stays float32 as written. Every other kernel keeps the plain conversion, whose narrowing is
exact, and its source (and every validation probe's) is unchanged.
"""

from __future__ import annotations

import torch

from fuser.dtypes import HALF_DTYPES
from fuser.nodes import bind_arguments, meta
from fuser.ops import POINTWISE_BY_OVERLOAD, Result, Typing


def hides_widening(kernel) -> bool:
    """Whether `kernel` (a `fuser.partition.Kernel`) must widen its half values opaquely."""
    if kernel.device.type != "cuda":
        return False
    halves = {
        value.dtype
        for node in (*kernel.leaves, *kernel.computed)
        if isinstance(value := meta(node), torch.Tensor) and value.dtype in HALF_DTYPES
    }
    if len(halves) > 1:
        return True
    return bool(halves) and any(_compares_inexactly(node, halves) for node in kernel.computed)


def _compares_inexactly(node, halves: set[torch.dtype]) -> bool:
    """A comparison of a tensor with a float scalar that some half type in `halves` cannot hold exactly."""
    op = POINTWISE_BY_OVERLOAD.get(node.target)
    if op is None or op.result is not Result.BOOL or any(t is not Typing.COMMON for _, t in op.operands):
        return False
    return any(
        isinstance(value, float) and any(torch.tensor(value, dtype=half).item() != value for half in halves)
        for value in bind_arguments(node).values()
    )
