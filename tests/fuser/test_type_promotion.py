"""Type promotion of 0-dim operands, as eager does it (found by the fuzzer, `python -m conformance.fuzz`;
each test is its shrunk program).

A 0-dim tensor meets a dimensioned one of a lower floating dtype: type promotion makes the dimensioned
one's dtype the common one, and eager rounds the 0-dim operand to it before computing. The fuser held the
0-dim float32 operand unrounded, so `lt(float32 0-dim, bfloat16 row)` differed from eager wherever the
scalar fell between two bfloat16 values (17 of 16411 elements in the fuzzer's `ci` profile, 2026-11-25).
"""

from __future__ import annotations

import pytest
import torch
from shared_checks import fused_matches_eager

HALF = (torch.bfloat16, torch.float16)


def _row(dtype: torch.dtype, device: str) -> torch.Tensor:
    # Every value of the dtype near the scalar: the scalar rounds to one of them, between two others.
    return torch.linspace(0.9, 1.1, 301, dtype=torch.float64).to(dtype).to(device)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("op", [torch.lt, torch.le, torch.eq, torch.ge, torch.gt, torch.ne])
def test_a_wider_0dim_tensor_is_rounded_to_the_common_dtype_before_a_comparison(op, dtype, device):
    scalar = torch.tensor(1.0 + 2**-12, dtype=torch.float32, device=device)  # not a bfloat16 or half value
    row = _row(dtype, device)
    fused_matches_eager(lambda s, x: op(s, x), scalar, row, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_a_wider_0dim_tensor_is_rounded_to_the_common_dtype_before_arithmetic(dtype, device):
    scalar = torch.tensor(1.0 + 2**-12, dtype=torch.float32, device=device)
    row = _row(dtype, device)
    fused_matches_eager(lambda s, x: x - s, scalar, row, rtol=0, atol=0)


def test_an_integer_0dim_tensor_is_rounded_to_the_common_dtype(device):
    big = torch.tensor(
        2**24 + 1, dtype=torch.int64, device=device
    )  # rounds in float16 to inf, in bf16 to 2**24
    row = torch.tensor([2.0**24, 2.0**24 + 2**17], dtype=torch.bfloat16, device=device)
    fused_matches_eager(lambda s, x: torch.eq(x, s), big, row, rtol=0, atol=0)
