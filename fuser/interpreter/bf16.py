"""Bit-exact bfloat16 conversions for kernels run by Triton's interpreter.

The interpreter holds a bfloat16 block as its uint16 bits but converts it as if subnormals were zero, and
narrows a float32 by truncating. c10 widens exactly (a bfloat16 is the top half of a float32) and narrows
to nearest-even, with every nan becoming 0x7FC0. `fuser.runtime` binds these in place of kernel_lib's
`widen_bf16` and `narrow_bf16` (which are plain conversions, exact on a GPU).
"""

from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _tensor(bits_or_values: np.ndarray, dtype: tl.dtype, like: tl.tensor) -> tl.tensor:
    block = tl.block_type(dtype, like.type.shape) if like.type.is_block() else dtype
    return tl.tensor(TensorHandle(bits_or_values, dtype), block)


def widen_bf16(x: tl.tensor) -> tl.tensor:
    bits = x.handle.data.view(np.uint16).astype(np.uint32) << 16
    return _tensor(bits.view(np.float32), tl.float32, x)


def narrow_bf16(x: tl.tensor) -> tl.tensor:
    values = x.handle.data.astype(np.float32, copy=False)
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # overflow rounds to inf
    rounded = np.where(np.isnan(values), np.uint16(0x7FC0), rounded)
    return _tensor(rounded, tl.bfloat16, x)
