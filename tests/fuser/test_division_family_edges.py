"""Division-family ops, atan2, hypot, copysign and lerp at signed zeros, infinities, nan and subnormals.

Each pairs every awkward value with every other, so a 0-d or negative divisor, a zero of either sign and
a subnormal (which libdevice's float32 functions flush to zero on a GPU) all reach each op. Eager is the
reference, exactly (signs of zeros included).
"""

from __future__ import annotations

import pytest
import torch
from shared_checks import fused_matches_eager

import fuser

# fmod and remainder in float32 and float64 are left out of the cpu manifest by eager's vectorized fmod
# (ledgered: it gives nan where the exact remainder is finite); these tests hold the lowering to eager's
# scalar answers at the edges, so they opt in.
pytestmark = pytest.mark.opt_in_unvalidated("fmod/remainder floats, left out of the manifest by eager's fmod")

FLOATS = [torch.float32, torch.float64, torch.bfloat16]


def awkward(dtype: torch.dtype) -> list[float]:
    # Finite values stay within 1 in magnitude, so no quotient by a subnormal overflows: there eager's
    # vectorized CPU fmod returns nan where the exact remainder (the fuser's, CUDA's) is finite.
    tiny = torch.finfo(dtype).smallest_normal
    return [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 0.5, -0.75, tiny / 4, -tiny / 4]


def pairs(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    values = awkward(dtype)
    a = torch.tensor([x for x in values for _ in values], dtype=dtype, device=device)
    b = torch.tensor([y for _ in values for y in values], dtype=dtype, device=device)
    return a, b


EXACT = {"rtol": 0, "atol": 0}


def matches_eager_to_the_sign_of_zero(program, *args, tolerance: dict = EXACT) -> None:
    """The shared check (kernels ran; dtypes, shapes and inputs as eager's) with every result equal to
    eager's within `tolerance` (exactly unless given; nan equal to nan) and each of eager's zeros signed as
    eager's is (assert_close takes -0.0 for 0.0)."""

    def compare(fused, eager):
        for got, want in zip(fused, eager, strict=True):
            torch.testing.assert_close(got, want, equal_nan=True, **tolerance)
            zero = want == 0
            assert torch.equal(torch.signbit(got[zero]), torch.signbit(want[zero])), "a zero's sign differs"

    fused_matches_eager(program, *args, compare=compare, **tolerance)


def division_program(a, b):
    return (
        torch.div(a, b, rounding_mode="floor"),
        torch.div(a, b, rounding_mode="trunc"),
        torch.div(a, b),
        torch.floor_divide(a, b),
        torch.fmod(a, b),
        torch.remainder(a, b),
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_division_family_matches_eager_at_zeros_infinities_and_subnormals(dtype, device):
    a, b = pairs(dtype, device)
    matches_eager_to_the_sign_of_zero(division_program, a, b)


@pytest.mark.parametrize("divisor", [-0.5, -0.75, -0.0, 0.0, float("inf"), -float("inf")])
def test_division_family_by_a_0d_divisor_matches_eager(divisor, device):
    # A 0-d operand beside a block: its comparisons must combine with the block's (the interpreter
    # raised on `bool_block & 0d_comparison` in remainder's and floor division's helpers).
    a, _ = pairs(torch.float32, device)
    b = torch.tensor(divisor, device=device)
    matches_eager_to_the_sign_of_zero(division_program, a, b)
    matches_eager_to_the_sign_of_zero(division_program, b, a)


def test_remainders_backward_matches_eager(device):
    a, b = pairs(torch.float32, device)
    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch.remainder(a, b).sum().backward()
    want = a.grad, b.grad
    a.grad = b.grad = None
    fuser.compile(lambda x, y: torch.remainder(x, y).sum())(a, b).backward()
    assert fuser.counters()["kernels_launched"] > 0, "no kernel ran: eager checked against eager"
    torch.testing.assert_close((a.grad, b.grad), want, rtol=0, atol=0, equal_nan=True)


def angle_program(a, b):
    return torch.atan2(a, b), torch.hypot(a, b), torch.copysign(a, b)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_atan2_hypot_copysign_match_eager_at_zeros_infinities_and_subnormals(dtype, device):
    a, b = pairs(dtype, device)
    # atan2 and hypot are not correctly rounded: a few ulp, but every nan, infinity and zero as eager's.
    # (On a GPU, atan2(tiny, 1) is 0 where eager's is tiny: libdevice flushes a subnormal beside a
    # normal operand, a difference below the smallest normal.)
    tolerance = {"rtol": 1.3e-6, "atol": torch.finfo(dtype).smallest_normal} if dtype == torch.float32 else {}
    matches_eager_to_the_sign_of_zero(angle_program, a, b, tolerance=tolerance)


def lerp_program(a, b, w):
    return torch.lerp(a, b, w), torch.lerp(a, b, float("inf")), torch.lerp(a, b, -float("inf"))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_lerp_matches_eager_at_infinite_weights_and_subnormal_ends(dtype, device):
    a, b = pairs(dtype, device)
    w = b.flip(0)
    matches_eager_to_the_sign_of_zero(lerp_program, a, b, w)


def row_program(s, x):
    # A 0-d operand beside a 2-D block of a row kernel (remainder's backward fuses floor division with
    # its gradients' sums): the interpreter raised on `bool_block & 0d_comparison` in the helpers.
    total = x.sum(-1, keepdim=True)
    return (
        torch.div(s, x, rounding_mode="floor") + total,
        torch.remainder(s, x) + total,
        torch.floor_divide(x, s) + total,
    )


def test_floor_division_and_remainder_of_a_0d_operand_in_a_row_kernel(device):
    _, b = pairs(torch.float32, device)
    x = torch.where(b.isfinite(), b, 1.0).reshape(11, 11)
    s = torch.tensor(-0.75, device=device)
    matches_eager_to_the_sign_of_zero(row_program, s, x)


@pytest.mark.parametrize("dtype", [*FLOATS, torch.float16], ids=str)
def test_negation_keeps_the_sign_of_zero(dtype, device):
    # Found by the conformance suite's producer context (-(-x)) on the H100: Triton 3.6's unary minus
    # is 0 - x, which turns -0.0 into +0.0 (then rsqrt(-0.0) is +inf, not -inf).
    x = torch.tensor(awkward(dtype), dtype=dtype, device=device)

    def program(x):
        return torch.neg(x), torch.neg(torch.neg(x)), torch.rsqrt(torch.neg(torch.neg(x)))

    matches_eager_to_the_sign_of_zero(program, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_addcmul_associates_as_the_devices_kernel(dtype, device):
    # ATen's CPU addcmul computes (value * t1) * t2, its CUDA one value * (t1 * t2): at t1 = max,
    # t2 = 0, value = 2 the CPU overflows to inf * 0 = nan and CUDA gives 0 (found on the H200s).
    big = torch.finfo(dtype).max
    x = torch.tensor([0.0, 1.0, -float("inf"), 0.0], dtype=dtype, device=device)
    t1 = torch.tensor([big, big, big, 0.5], dtype=dtype, device=device)
    t2 = torch.tensor([0.0, -0.0, 2.0, 3.0], dtype=dtype, device=device)

    def program(x, t1, t2):
        return torch.addcmul(x, t1, t2, value=2)

    matches_eager_to_the_sign_of_zero(program, x, t1, t2)


# Found by the clean validation run's fuzz stage: fused, 0/0 of two bools was integer division, 0 (False),
# so `1.5 + prims.div(False, False)` gave 1.5. Eager's prims.div returns float32 there (nan), against its
# own meta's bool, so no compiled graph can give eager's nan; the graph's answer is bool(0/0) = True: 2.5,
# as Inductor gives. The fuser leaves bool prims.div eager and converts its result to the traced bool.
@pytest.mark.opt_in_unvalidated("every other operand dtype of prims.div is lowered, so bools must refuse")
def test_true_division_of_bools_runs_eagerly_and_follows_the_traced_dtype(device):
    def program(x, numerator, denominator):
        return x + torch.ops.prims.div.default(numerator, denominator)

    x = torch.tensor([1.5, 1.5, 1.5, 1.5], device=device)
    numerator = torch.tensor([False, True, False, True], device=device)
    denominator = torch.tensor([False, False, True, True], device=device)
    explained = fuser.explain(program, x, numerator, denominator)
    assert "prims.div.default: prims_div is not lowered for bool operands" in str(explained)
    compiled = torch.compile(program, backend="fuser")(x, numerator, denominator)
    # bool(0/0) = bool(1/0) = bool(1/1) = True, bool(0/1) = False
    torch.testing.assert_close(compiled, torch.tensor([2.5, 2.5, 1.5, 2.5], device=device))
