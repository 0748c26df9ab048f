"""Kernels whose float32 arithmetic on half values LLVM would narrow wrongly on CUDA.

The fuser computes half-precision values in float32, as ATen's kernels do, and writes each widening as a
conversion. The LLVM inside Triton (3.6 on the lent H200, 3.9 in its PTX here) narrows float32 arithmetic
on widened halves back to a half type: `float16(float32(a) * float32(b))` becomes a float16 multiply.
That is exact when every operand comes from that half type, and wrong when they mix: for a float16 `a`
and a bfloat16 `b` it rounds `b` to float16 first, so b = 2**-126 becomes 0 and inf * b nan (eager: inf;
`tools/gpu/half_mixed_ptx.py`, docs/gpu-runs.md). A CUDA kernel that holds both half types therefore
widens through `lib.widen_opaque`, which LLVM cannot see into, and its arithmetic stays float32 as
written. Every other kernel keeps the plain conversion, and its source (and every validation probe's,
each of one dtype) is unchanged.
"""

from __future__ import annotations

import torch

from fuser.lower.dtypes import HALF_DTYPES
from fuser.lower.nodes import meta


def hides_widening(kernel) -> bool:
    """Whether `kernel` (a `fuser.plan.partition.Kernel`) must widen its half values opaquely."""
    if kernel.device.type != "cuda":
        return False
    halves = {
        value.dtype
        for node in (*kernel.leaves, *kernel.computed)
        if isinstance(value := meta(node), torch.Tensor) and value.dtype in HALF_DTYPES
    }
    return len(halves) > 1
