"""Tensors created inside the compiled program, combined in the same kernel with other values.

A created or filled value lives in its dtype: a half fill of 0.1 is bfloat16(0.1) = 0.10009765625, and
eager combines that value with the rest. A kernel that kept the fill as float32's 0.1 and combined it
before storing was wrong by 1e-4 where the result cancels (and x == fill was False), yet right when the
fill was stored alone (one op after the fill: the fuser keeps half values in float32 between ops, so
longer chains round differently by design) — which is why the conformance suite's single-op cases passed it (found by the
created-tensor family: conformance/specs/created.py, conformance/specs/combine.py).
"""

from __future__ import annotations

import pytest
import torch
from shared_checks import fused_matches_eager

HALF = [torch.float16, torch.bfloat16]
FILLS = [0.1, -2.5, 1 / 3]  # inexact in both half dtypes, exact, inexact


def near_fill(value: float, dtype: torch.dtype, device: str) -> torch.Tensor:
    """x holding the fill as the dtype rounds it, and values around it."""
    rounded = torch.tensor(value, dtype=dtype).item()
    return torch.tensor([rounded, -rounded, 0.0, 1.0, rounded * 2], dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("value", FILLS)
@pytest.mark.parametrize("make", ["full_like", "full", "scalar_tensor"])
def test_a_fill_is_rounded_to_its_dtype_before_it_is_combined(make, dtype, value, device) -> None:
    def program(x):
        if make == "full":
            filled = torch.full(x.shape, value, dtype=x.dtype, device=x.device)
        elif make == "scalar_tensor":
            filled = torch.scalar_tensor(value, dtype=x.dtype, device=x.device)
        else:
            filled = torch.full_like(x, value)
        return filled - x, filled == x

    x = near_fill(value, dtype, device)
    report = fused_matches_eager(program, x, rtol=0, atol=0)
    assert f"aten.{make}.default" not in report.eager_calls


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int64, torch.float64], ids=str)
def test_full_of_every_kind_of_dtype_alone_and_empty(dtype, device) -> None:
    def program(x):
        return torch.full((3, 0), 1, dtype=dtype, device=x.device), torch.full(
            (2, 5), 1, dtype=dtype, device=x.device
        ) + x

    x = torch.arange(5, device=device).to(dtype)
    fused_matches_eager(program, x, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("value", FILLS)
def test_masked_fill_value_is_rounded_to_its_dtype_before_it_is_combined(dtype, value, device) -> None:
    def program(x, mask):
        filled = x.masked_fill(mask, value)
        return filled - x, filled == x

    x = near_fill(value, dtype, device)
    mask = torch.tensor([True, False, True, True, False], device=device)
    fused_matches_eager(program, x, mask, rtol=0, atol=0)


LINSPACE_DTYPES = [torch.int64, torch.int32, torch.uint8, torch.bfloat16, torch.float16, torch.float32]
ENDS = [(-3.3, 7.9), (10, -10), (0.5, 100.25)]
# uint8 cannot hold a negative end (eager raises), so it takes the positive range only.
RANGES = [(d, e) for d in LINSPACE_DTYPES for e in ENDS if d != torch.uint8 or min(e) >= 0]


@pytest.mark.parametrize(("dtype", "ends"), RANGES, ids=str)
@pytest.mark.parametrize("steps", [7, 64])
def test_linspace_and_logspace_follow_eager_in_every_dtype(dtype, ends, steps, device) -> None:
    """ATen computes an integer linspace from truncated ends in double with fused multiply-adds, and a
    half one in the half dtype's own arithmetic; a float32 formula over an iota differs by one (ints)
    or an ulp (halves) at some positions."""
    start, end = ends

    def program(x):
        line = torch.linspace(start, end, steps, dtype=dtype, device=device)
        powers = torch.logspace(start / 10, end / 10, steps, base=2.0, dtype=dtype, device=device)
        return line - x, powers - x

    x = torch.zeros(steps, dtype=dtype, device=device)
    fused_matches_eager(program, x, rtol=0, atol=0)


@pytest.mark.parametrize("size", [(7, 7), (3, 20000), (300, 2)], ids=str)
def test_eye_of_any_size_comes_back_right(size, device) -> None:
    """PyTorch's eye decomposition picks its index dtype by size (uint16 past 255, through
    _strength_reduce_integer), and eager has no uint16 arange on CPU: the fuser's eager call of it
    raised NotImplementedError for eye(3, 20000) (found by conformance/specs/created.py)."""

    def program(x):
        return torch.eye(*size, dtype=x.dtype, device=device) - x

    x = torch.ones(size, device=device)
    fused_matches_eager(program, x, rtol=0, atol=0)
