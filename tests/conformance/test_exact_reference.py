"""fmod's and remainder's float64 reference is exact (`conformance.specs.exact`): eager's vectorized CPU
fmod is nan wherever |a / b| passes the dtype's range, and the reference used to run that same kernel, so a
backend giving the exact remainder failed against both (docs/conformance.md, session 27)."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
import torch

from conformance.harness.runner import Program
from conformance.specs.catalog import SPECS
from conformance.specs.samples import Sample

# 256 elements all take eager's vectorized loop (no scalar tail); a float32 maximum over a float64
# subnormal overflows double there.
BIG = torch.full((256,), 3.4028234663852886e38, dtype=torch.float64)
TINY = torch.full((256,), 5e-324, dtype=torch.float64)


def reference_program(op: str, spec=None):
    spec = spec or SPECS[op]
    return Program(
        spec, "alone", [Sample((BIG, TINY), {}, "a float32 maximum over a float64 subnormal")], reference=True
    ).function()


@pytest.mark.parametrize("op", ["aten.fmod.Tensor", "aten.remainder.Tensor"])
def test_the_reference_is_exact_where_eager_s_float64_kernel_overflows(op):
    eager = getattr(torch, op.split(".")[1])(BIG, TINY)
    assert eager.isnan().all()  # the kernel the reference used to run
    (result,) = reference_program(op)(BIG.clone(), TINY.clone())
    assert torch.equal(result, torch.from_numpy(np.fmod(BIG.numpy(), TINY.numpy())))  # 0: exact
    without = dataclasses.replace(SPECS[op], reference=None)
    (plain,) = reference_program(op, without)(BIG.clone(), TINY.clone())
    assert plain.isnan().all()  # what the oracle compared against before


@pytest.mark.parametrize("op", ["aten.fmod_.Tensor", "aten.remainder_.Tensor"])
def test_the_in_place_reference_writes_the_exact_remainder(op):
    target = BIG.clone()
    reference_program(op)(target, TINY.clone())
    assert torch.equal(target, torch.zeros_like(BIG))


@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_values_and_gradients_match_eager_where_eager_is_exact(name):
    torch.manual_seed(0)
    a = (torch.randn(5, 7, dtype=torch.float64) * 10).requires_grad_()
    b = (torch.randn(7, dtype=torch.float64) + 3).requires_grad_()
    eager = getattr(torch, name)(a, b)
    (result,) = reference_program(f"aten.{name}.Tensor")(a, b)
    assert torch.equal(result, eager)  # remainder's sign follows the divisor's, as ATen's
    seed = torch.randn(5, 7, dtype=torch.float64)
    assert all(torch.equal(x, y) for x, y in zip(
        torch.autograd.grad(result, (a, b), seed), torch.autograd.grad(eager, (a, b), seed), strict=True
    ))  # fmt: skip


# var_mean's reference: eager's running (Welford) mean leaves a residue where the exact mean is 0, and
# gives nan where an inf meets another element; the two-pass reference gives 0 and inf.
ROWS = torch.tensor([[1.5e19, -1.5e19] * 5, [3.0, 4.0] * 5, [1.0, float("inf"), 2.0] + [0.0] * 7])


def var_mean_reference(x, **kwargs):
    return Program(
        SPECS["aten.var_mean.correction"], "alone", [Sample((x,), kwargs, "")], reference=True
    ).function()(x)[0]


def test_the_var_mean_reference_sums_its_mean():
    x = ROWS.double()
    eager_var, eager_mean = torch.var_mean(x, dim=[-1])
    assert eager_mean[0] != 0 and eager_mean[2].isnan()  # what the oracle compared against before
    var, mean = var_mean_reference(x.clone(), dim=[-1])
    assert mean.tolist()[:2] == [0.0, 3.5] and mean[2] == float("inf")
    torch.testing.assert_close(var[:2], eager_var[:2], rtol=1e-15, atol=0)
    assert var[2].isnan()  # eager's too: inf - inf about the mean


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"dim": [0, 2], "keepdim": True}, {"dim": [-1], "correction": 0}, {"dim": None, "correction": 2}],
)
def test_the_var_mean_reference_matches_eager_on_plain_values(kwargs):
    torch.manual_seed(0)
    x = torch.randn(4, 5, 6, dtype=torch.float64, requires_grad=True)
    var, mean = var_mean_reference(x, **kwargs)
    eager_var, eager_mean = torch.var_mean(x, **kwargs)
    torch.testing.assert_close((var, mean), (eager_var, eager_mean), rtol=1e-14, atol=1e-15)
    seeds = (torch.randn_like(var), torch.randn_like(mean))
    grads = torch.autograd.grad((var, mean), x, seeds)
    torch.testing.assert_close(
        grads, torch.autograd.grad((eager_var, eager_mean), x, seeds), rtol=1e-13, atol=0
    )


@pytest.mark.parametrize("shape, dim", [((), None), ((0, 7), [-1]), ((5, 0), [-1]), ((1,), [-1])])
def test_the_var_mean_reference_has_eager_s_shapes_and_empty_rows(shape, dim):
    x = torch.ones(shape, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager warns of zero degrees of freedom
        expected = torch.var_mean(x, dim=dim)
    got = var_mean_reference(x, dim=dim)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, equal_nan=True)


def group_norm_reference(*args):
    spec = SPECS["aten.native_group_norm.default"]
    tensors = [a for a in args if isinstance(a, torch.Tensor)]  # the program's inputs
    return Program(spec, "alone", [Sample(args, {}, "")], reference=True).function()(*tensors)[0]


def test_the_group_norm_reference_sums_its_mean():
    x = torch.tensor([[1.0, float("inf"), 2.0, 3.0]], dtype=torch.float64).reshape(1, 4, 1)
    assert torch.ops.aten.native_group_norm(x, None, None, 1, 4, 1, 1, 1e-5)[1].isnan().all()  # eager's
    _, mean, rstd = group_norm_reference(x, None, None, 1, 4, 1, 1, 1e-5)
    assert mean.item() == float("inf") and rstd.isnan().all()


@pytest.mark.parametrize("shape, groups", [((3, 6, 5), 2), ((2, 4), 4), ((3, 4, 0), 2), ((0, 4, 5), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_the_group_norm_reference_matches_eager_on_plain_values(shape, groups, affine):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    n, c, inner = shape[0], shape[1], math.prod(shape[2:])
    w, b = (torch.randn(c, dtype=torch.float64, requires_grad=True) if affine else None for _ in range(2))
    args = (x, w, b, n, c, inner, groups, 1e-5)
    got, expected = group_norm_reference(*args), torch.ops.aten.native_group_norm(*args)
    torch.testing.assert_close(got, expected, rtol=1e-13, atol=1e-14, equal_nan=True)
    if x.numel():
        seeds = [torch.randn_like(t) for t in expected]
        leaves = [t for t in (x, w, b) if t is not None]
        torch.testing.assert_close(
            torch.autograd.grad(got, leaves, seeds),
            torch.autograd.grad(expected, leaves, seeds),
            rtol=1e-12,
            atol=1e-13,
        )


# hardsigmoid's family: ATen multiplies by one_sixth = 1.0f / 6.0f, a float32 constant, in float64 too (the
# backward on every device, the forwards on CUDA); the reference's sixth is exact, its masks eager's.
X = torch.tensor(
    [-4.0, -3.0, -1.5, 0.0, 1.0, 3.0, 4.5, float("inf"), -float("inf"), float("nan")], dtype=torch.float64
)
G = torch.linspace(-2.0, 3.0, len(X), dtype=torch.float64)


def sixth_reference(op: str, *tensors):
    sample = Sample(tensors, {}, "")
    return Program(SPECS[op], "alone", [sample], reference=True).function()(*tensors)[0]


def test_the_hardsigmoid_backward_reference_multiplies_by_an_exact_sixth():
    eager = torch.ops.aten.hardsigmoid_backward(G, X)
    exact = torch.where((X > -3) & (X < 3), G / 6, 0.0)
    assert not torch.equal(eager, exact)  # eager's float32 sixth: what the oracle compared against before
    assert torch.equal(sixth_reference("aten.hardsigmoid_backward.default", G, X), exact)
    torch.testing.assert_close(eager, exact, rtol=1e-7, atol=0)  # the same masks: ±3 and nan give 0


def test_an_integer_grad_beside_a_float64_x_gets_the_exact_sixth_too():
    """The promotion sample (an int64 grad, a 0-d float64 x) gives a float64 result: only an integer
    result takes eager's op (its error); the full tier found the reference falling back on any integer."""
    grad = torch.arange(-3, 4)
    exact = grad.double() / 6
    assert torch.equal(
        sixth_reference("aten.hardsigmoid_backward.default", grad, torch.tensor(0.5, dtype=torch.float64)),
        exact,
    )


@pytest.mark.parametrize("op", ["hardsigmoid", "hardswish"])
def test_the_hardsigmoid_and_hardswish_references_match_eager_s_values_and_gradients(op):
    x = torch.cat([X, torch.randn(50, dtype=torch.float64) * 4]).requires_grad_()
    result = sixth_reference(f"aten.{op}.default", x)
    eager = getattr(torch.ops.aten, op)(x)
    torch.testing.assert_close(
        result, eager, rtol=1e-15, atol=0, equal_nan=True
    )  # eager's CPU sixth is exact
    seed = torch.randn_like(result)
    (grad,) = torch.autograd.grad(result, x, seed)
    (eager_grad,) = torch.autograd.grad(eager, x, seed)
    # hardsigmoid's gradient is exact here, eager's float32-accurate; the zeros at ±3 and nan are the same.
    torch.testing.assert_close(grad, eager_grad, rtol=1e-7, atol=0, equal_nan=True)
    assert torch.equal(grad == 0, eager_grad == 0)
    if op == "hardsigmoid":
        assert torch.equal(grad, torch.where((x > -3) & (x < 3), seed / 6, 0.0))


def test_the_in_place_hardsigmoid_reference_writes_the_exact_values():
    target = X.clone()
    sixth_reference("aten.hardsigmoid_.default", target)
    torch.testing.assert_close(target, torch.clamp(X + 3, 0, 6) / 6, rtol=0, atol=0, equal_nan=True)


def test_an_exact_reference_that_raises_fails_the_case_instead_of_dropping_the_reference():
    """Eager's float64 kernel may be missing (no second opinion then), but a spec's own reference is the
    suite's code: a bug in it (the hardsigmoid family's first version called torch.result_type with one
    tensor) left every case without its float64 reference, silently."""
    from conformance.harness.runner import expect

    def broken(*tensors):
        raise TypeError("a bug in the reference")

    spec = dataclasses.replace(SPECS["aten.hardsigmoid.default"], reference=broken)
    sample = Sample((X.float(),), {}, "")
    with pytest.raises(RuntimeError, match=r"hardsigmoid.default's exact reference .*a bug in the reference"):
        expect(spec, "alone", sample, backward=False, seed=0)
    assert (
        expect(SPECS["aten.hardsigmoid.default"], "alone", sample, backward=False, seed=0).reference
        is not None
    )


# gelu_backward's tanh approximation: 1 - tanh(u)^2 cancels as tanh nears ±1, so a half-ulp difference
# between two tanh implementations becomes several ulps of the result; eager's float64 kernel (the
# reference before) was 21 ulps off the true value near |x| = 7.15 on this machine. The reference is
# long double's.
NEAR_SATURATION = torch.tensor(
    [-7.146227117434515, 7.147479160548955, -2.5, -0.75, 0.0, 1.5, 4.0, 12.0], dtype=torch.float64
)


def gelu_tanh_derivative(x: float):
    import mpmath

    with mpmath.workprec(200):
        beta, kappa, x = mpmath.mpf(0.7978845608028654), mpmath.mpf(0.044715), mpmath.mpf(x)
        t = mpmath.tanh(beta * (x + kappa * x**3))
        return float(0.5 * (1 + t) + 0.5 * x * (1 - t * t) * beta * (1 + 3 * kappa * x * x))


def gelu_backward_reference(grad, x, **kwargs):
    sample = Sample((grad, x), kwargs, "")
    return Program(SPECS["aten.gelu_backward.default"], "alone", [sample], reference=True).function()(
        grad, x
    )[0]


def test_the_gelu_backward_tanh_reference_is_within_an_ulp_of_the_true_derivative():
    grad = torch.ones_like(NEAR_SATURATION)
    got = gelu_backward_reference(grad, NEAR_SATURATION, approximate="tanh")
    true = torch.tensor([gelu_tanh_derivative(v) for v in NEAR_SATURATION.tolist()], dtype=torch.float64)
    ulp_of_one = torch.finfo(torch.float64).eps
    assert ((got - true).abs() <= ulp_of_one).all(), (got - true) / ulp_of_one
    # The formula's, not eager's: eager's float64 kernel is further off where tanh saturates.
    eager = torch.ops.aten.gelu_backward(grad, NEAR_SATURATION, approximate="tanh")
    assert ((eager - true).abs() / ulp_of_one).max() > ((got - true).abs() / ulp_of_one).max()


def test_the_gelu_backward_reference_keeps_eager_s_nan_inf_and_the_erf_form():
    x = torch.cat([X, torch.randn(40, dtype=torch.float64) * 3])
    grad = torch.linspace(-3.0, 3.0, len(x), dtype=torch.float64)
    got = gelu_backward_reference(grad, x, approximate="tanh")
    eager = torch.ops.aten.gelu_backward(grad, x, approximate="tanh")
    finite = eager.isfinite()
    assert torch.equal(got.isnan()[finite], eager.isnan()[finite])
    torch.testing.assert_close(got[finite], eager[finite], rtol=1e-14, atol=1e-14)
    assert got[X.isnan().nonzero()].isnan().all()  # a nan x stays nan
    # approximate='none' is well conditioned: eager's kernel is the reference, bit for bit.
    torch.testing.assert_close(
        gelu_backward_reference(grad, x),
        torch.ops.aten.gelu_backward(grad, x),
        rtol=0,
        atol=0,
        equal_nan=True,
    )
