"""The dtypes the fuser lowers, how Triton spells them, and which dtype a kernel computes in."""

from __future__ import annotations

import torch

TRITON_DTYPE: dict[torch.dtype, str] = {
    torch.bool: "tl.int1",
    torch.uint8: "tl.uint8",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
}

SUPPORTED_DTYPES = frozenset(TRITON_DTYPE)
HALF_DTYPES = frozenset({torch.float16, torch.bfloat16})


def value_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel holds a value of `dtype` in: half types widen to fp32 (rounded
    to their dtype where each op makes them: `fuser.emit.codegen.Builder.made`)."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


def arithmetic_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic producing `dtype` runs in: bools as int32 (True + True is True, not a wrap)."""
    return torch.int32 if dtype == torch.bool else value_dtype(dtype)


def is_integral(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex


def triton_name(dtype: torch.dtype) -> str:
    return TRITON_DTYPE[dtype]
