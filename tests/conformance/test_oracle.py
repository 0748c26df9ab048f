"""The oracle: exact integers, nan and inf positions, dtype tolerances, and the float64 fallback."""

from __future__ import annotations

import math

import torch

from conformance.harness.oracle import compare


def test_equal_integers_pass_and_one_wrong_integer_fails():
    expected = torch.arange(10, dtype=torch.int8)
    assert compare(expected.clone(), expected).ok
    wrong = expected.clone()
    wrong[7] += 1
    verdict = compare(wrong, expected)
    assert not verdict.ok and "1 of 10 elements" in verdict.message and "at [7]" in verdict.message


def test_dtype_and_shape_must_match_exactly():
    expected = torch.ones(3, 4)
    assert "dtype" in compare(expected.double(), expected).message
    assert "shape" in compare(torch.ones(4, 3), expected).message
    assert "2 values" in compare((expected,), (expected, expected)).message


def test_a_nan_where_eager_has_a_number_fails_even_without_a_reference():
    expected = torch.tensor([1.0, 2.0, 3.0])
    actual = torch.tensor([1.0, math.nan, 3.0])
    verdict = compare(actual, expected)
    assert not verdict.ok and "nan/inf" in verdict.message


def test_inf_signs_must_match():
    assert not compare(torch.tensor([-math.inf]), torch.tensor([math.inf])).ok


def test_a_nan_eager_gets_wrong_passes_when_the_float64_reference_agrees_with_the_compiled_result():
    expected = torch.tensor([math.nan, 1.0])
    actual = torch.tensor([0.5, 1.0])
    reference = torch.tensor([0.5, 1.0], dtype=torch.float64)
    assert compare(actual, expected, reference).ok
    assert not compare(torch.tensor([0.25, 1.0]), expected, reference).ok


def test_float_differences_within_the_dtype_tolerance_pass():
    expected = torch.tensor([1.0, 2.0], dtype=torch.float16)
    assert compare(
        expected + torch.tensor([0.0, 0.001953125], dtype=torch.float16), expected
    ).ok  # one ulp at 2


def test_a_result_more_exact_than_eager_passes_through_the_float64_fallback():
    exact = torch.tensor([1 / 3, 2 / 3, 0.1], dtype=torch.float64)
    eager = (exact + 2e-3).to(torch.float16)  # eager rounded an intermediate: off by ~1e-3
    compiled = exact.to(torch.float16)
    assert not compare(compiled, eager).ok  # beyond float16's rtol of 1e-3 ...
    assert compare(compiled, eager, exact).ok  # ... but closer to float64 than eager is


def test_a_wrong_result_fails_even_with_the_fallback():
    exact = torch.tensor([1 / 3, 2 / 3, 0.1], dtype=torch.float64)
    eager = exact.to(torch.float32)
    verdict = compare(eager + 1, eager, exact)
    assert not verdict.ok and "further from float64 than eager is" in verdict.message


def test_a_tolerance_override_is_used():
    expected = torch.tensor([1.0])
    assert not compare(torch.tensor([1.01]), expected).ok
    assert compare(torch.tensor([1.01]), expected, tolerance=(0.02, 0.0)).ok


def test_different_strides_are_reported_but_do_not_fail():
    expected = torch.zeros(3, 4)
    verdict = compare(torch.zeros(4, 3).t(), expected)
    assert verdict.ok and "strides" in verdict.notes[0]


def test_none_and_python_numbers_compare_by_value():
    assert compare([None, 3, math.nan], [None, 3, math.nan]).ok
    assert not compare([None, 4], [None, 3]).ok


def test_an_unspecified_element_is_not_compared_and_every_other_one_still_is():
    # Eager's gradient at a nan input is 0 on one layout and grad on another: no one answer there.
    expected = torch.tensor([0.0, 1.0, -math.inf, math.nan])
    reference = expected.double()
    unspecified = torch.tensor([True, False, False, False])
    differs_there = torch.tensor([1.5, 1.0, -math.inf, math.nan])
    assert not compare(differs_there, expected, reference).ok
    assert compare(differs_there, expected, reference, unspecified=unspecified).ok
    for wrong in (
        torch.tensor([1.5, 1.0, math.inf, math.nan]),  # an inf's sign elsewhere
        torch.tensor([1.5, 1.0, -math.inf, 2.0]),  # a nan position elsewhere
        torch.tensor([1.5, 1.1, -math.inf, math.nan]),  # a finite value elsewhere
    ):
        verdict = compare(wrong, expected, reference, unspecified=unspecified)
        assert not verdict.ok and "1 of 4 elements" in verdict.message


def test_unspecified_masks_follow_the_structure_of_the_result():
    expected = [torch.tensor([0.0, 1.0]), None, torch.tensor([2.0, 3.0])]
    masks = [torch.tensor([True, False]), None, None]
    assert compare([torch.tensor([9.0, 1.0]), None, expected[2]], expected, unspecified=masks).ok
    verdict = compare([expected[0], None, torch.tensor([9.0, 3.0])], expected, unspecified=masks)
    assert not verdict.ok and "result[2]" in verdict.message


def test_the_runner_marks_the_positions_where_a_named_argument_holds_a_named_value():
    from conformance.harness.runner import fit, gradient_masks, output_masks, unspecified_mask
    from conformance.specs.catalog import SPECS
    from conformance.specs.samples import Sample

    spec = SPECS["aten.hardtanh_backward.default"]  # fwd: a nan self, min_val or max_val
    grad = torch.tensor([[math.nan, 1.0, 2.0]])
    self = torch.tensor([[0.5], [math.nan]])
    mask = unspecified_mask(spec, Sample((grad, self, -1.0, 1.0), {}, "t"), "fwd")
    assert mask.tolist() == [[False, False, False], [True, True, True]]  # a nan grad is not named
    assert unspecified_mask(spec, Sample((grad, self, -1.0, 1.0), {}, "t"), "bwd") is None
    everywhere = unspecified_mask(spec, Sample((grad, self, -1.0, math.nan), {}, "t"), "fwd")
    assert everywhere.all() and everywhere.shape == (2, 3)
    # A row reduced by the into_reduction context is unspecified where any of its elements is; the
    # gradient of a broadcast input where any position it feeds is.
    assert output_masks(mask, "into_reduction", torch.zeros(2)).tolist() == [False, True]
    assert fit(mask, torch.zeros(2, 1)).tolist() == [[False], [True]]
    assert fit(mask, torch.zeros(3)).tolist() == [True, True, True]
    # A gradient through a row reduction depends on the whole row (its max and ties): a row is unspecified
    # where any of its elements is; elsewhere, only that element.
    one = torch.tensor([[False, True, False], [False, False, False]])
    reduced, alone = (
        gradient_masks(one, context, [torch.zeros(2, 3)])[0].tolist()
        for context in ("into_reduction", "alone")
    )
    assert reduced == [[True, True, True], [False, False, False]]
    assert alone == one.tolist()
    consumer = gradient_masks(one, "consumer", [torch.zeros(2, 3)])[0]  # wraps the output, reduces nothing
    assert consumer.tolist() == one.tolist()
    logit = SPECS["aten.logit.default"]  # bwd only: logit(-0.0) itself is -inf everywhere
    x = torch.tensor([-0.0, 0.0, 0.5])
    assert unspecified_mask(logit, Sample((x,), {}, "t"), "bwd").tolist() == [True, False, False]
    assert unspecified_mask(logit, Sample((x,), {}, "t"), "fwd") is None


def test_a_zero_of_the_wrong_sign_fails_where_float64_agrees_with_eager():
    # neg(+0.0) computed as 0 - x: +0.0 where eager and float64 both say -0.0.
    expected = torch.tensor([-0.0, -1.0, 0.0])
    actual = torch.tensor([0.0, -1.0, 0.0])
    verdict = compare(actual, expected, expected.double(), signed_zeros=True)
    assert not verdict.ok and "zeros of the other sign" in verdict.message and "at [0]" in verdict.message
    assert compare(actual, expected, expected.double(), signed_zeros=True, forward=False).ok  # gradients
    assert compare(actual, expected, expected.double()).ok  # by default: a zero's sign is the formula's


def test_a_zero_sign_that_float64_does_not_share_is_eager_s_accident_and_not_checked():
    # float64 says +0.0, or a tiny positive that rounds to +0.0: eager's -0.0 is its own rounding accident.
    expected = torch.tensor([-0.0, -0.0])
    actual = torch.tensor([0.0, 0.0])
    assert compare(actual, expected, torch.tensor([1e-60, 0.0], dtype=torch.float64), signed_zeros=True).ok
    # A tiny negative rounds to -0.0: then the sign is defined and +0.0 is wrong.
    assert not compare(
        actual, expected, torch.tensor([-1e-60, 0.0], dtype=torch.float64), signed_zeros=True
    ).ok
    assert compare(actual, expected, signed_zeros=True).ok  # no reference: nothing says the sign is defined


def test_a_formula_that_lost_four_digits_fails_on_ulps_though_within_atol():
    # 1.00001 where float64 says 1.0: within atol=1e-5 + rtol, but 84 ulps of the result's scale.
    reference = torch.tensor([1.0, 0.5], dtype=torch.float64)
    expected = reference.float()
    assert compare(torch.tensor([1.00001, 0.5]), expected, reference).ok  # no budget: recorded only
    verdict = compare(torch.tensor([1.00001, 0.5]), expected, reference, ulp_budget=8)
    assert not verdict.ok and "84.0 ulps of the result's scale" in verdict.message
    assert compare(torch.tensor([1.00001, 0.5]), expected, reference, ulp_budget=100).ok  # a reasoned budget
    ok = compare(torch.tensor([1.0 + 2**-22, 0.5]), expected, reference, ulp_budget=8)  # a rounding order
    assert ok.ok and ok.ulps == (2.0, 0.0)


def test_ulps_are_at_the_result_s_scale_so_a_cancellation_near_zero_is_not_a_precision_loss():
    # The second element cancels to nearly zero: per element it is millions of ulps off in both
    # eager and the backend; at the result's scale (1.0) it is a fraction of one.
    reference = torch.tensor([1.0, 1e-12], dtype=torch.float64)
    expected = torch.tensor([1.0, 0.0])
    assert compare(torch.tensor([1.0, 3e-9]), expected, reference, ulp_budget=8).ok


def test_ulps_of_a_huge_float64_reference_do_not_overflow():
    # A float32 result at the top of its range where float64 went to the top of its own: eager and the
    # backend agree, and the ulps at that scale must not overflow (log2 of it rounds up to 1024).
    reference = torch.tensor([torch.finfo(torch.float64).max, 1.0], dtype=torch.float64)
    expected = torch.tensor([3e38, 1.0])
    assert compare(expected.clone(), expected, reference, ulp_budget=8).ok


def test_the_float64_reference_of_a_gradient_rounds_the_op_s_result_where_the_program_does():
    """Issue 27: the max of `into_reduction` splits its gradient among the row's ties, and which elements
    tie is decided by the op's float16 result: 65504 - 2 * -65504 rounds to inf and ties with inf - 2.
    A reference that never rounds sees one inf and gives it the whole gradient, twice a right answer."""
    from conformance.harness.runner import expect
    from conformance.specs.catalog import SPECS
    from conformance.specs.samples import Sample

    a = torch.tensor([[0.0, 65504.0, math.inf]], dtype=torch.float16)
    b = torch.tensor([[0.0, -65504.0, 1.0]], dtype=torch.float16)
    sample = Sample((a, b), {"alpha": 2}, "a finite result that rounds to inf")
    backward = expect(SPECS["aten.sub.Tensor"], "into_reduction", sample, backward=True, seed=0)
    half = backward.grad_outputs[0].to(torch.float64) / 2
    assert backward.reference_grads[0].tolist() == [[0.0, half.item(), half.item()]]
    assert backward.reference_grads[0].tolist() == backward.grads[0].to(torch.float64).tolist()  # eager's
    # Forward, the reference stays float64's exact answer (the oracle rounds it where it needs to).
    forward = expect(SPECS["aten.sub.Tensor"], "consumer", sample, backward=False, seed=0)
    assert forward.reference.tolist() == [[0.0, 196512.0, math.inf]]


def test_the_reference_of_an_op_that_computes_in_a_given_dtype_computes_in_float64():
    """log_softmax(x, dtype=float32) on float64 x computes in float32: a reference that kept the argument
    computed in float32 too, eager's error read 0, and a compiled gradient closer to float64 than eager's
    failed (the full tier's log_softmax.int backward cases on the CPU). A cast keeps its dtype: it is its
    meaning."""
    from conformance.harness.runner import expect
    from conformance.specs.catalog import SPECS
    from conformance.specs.samples import Sample

    x = torch.randn(3, 40_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    sample = Sample((x, -1), {"dtype": torch.float32}, "a float64 row computed in float32")
    expected = expect(SPECS["aten.log_softmax.int"], "alone", sample, backward=True, seed=0)
    (grad_output,) = expected.grad_outputs
    out = torch.log_softmax(x, -1)
    exact = grad_output.double() - out.exp() * grad_output.double().sum(-1, keepdim=True)
    assert (expected.reference_grads[0] - exact).abs().max() < 1e-12
    assert (expected.grads[0] - exact).abs().max() > 1e-6  # eager's, computed in float32
    cast = expect(
        SPECS["aten._to_copy.default"], "alone", Sample((x,), {"dtype": torch.float16}, "a cast"), False, 0
    )
    assert cast.reference.dtype == torch.float16


def test_eager_s_own_bits_pass_without_the_elementwise_rules_and_record_eager_s_ulps(monkeypatch):
    # The fast path: a result with eager's bits (nan, inf and signed zeros included, any strides) is
    # eager's answer; the elementwise rules are not run for it, and its ulps are eager's.
    from conformance.harness import oracle

    reference = torch.tensor([[1.0 + 2**-30, -0.0], [math.inf, math.nan]], dtype=torch.float64)
    expected = torch.tensor([[1.0, -0.0], [math.inf, math.nan]])

    def unexpected(*args):
        raise AssertionError("the elementwise rules ran on eager's own bits")

    monkeypatch.setattr(oracle, "_compare_floats", unexpected)
    verdict = compare(expected.t().contiguous().t(), expected, reference, ulp_budget=8, signed_zeros=True)
    assert verdict.ok and verdict.ulps == (oracle.ulps_of_scale(expected, reference, torch.float32),) * 2
    monkeypatch.undo()
    flipped = torch.tensor([[1.0, 0.0], [math.inf, math.nan]])  # one bit: the zero's sign
    assert not compare(flipped, expected, reference, signed_zeros=True).ok


def test_a_result_eager_never_writes_is_left_out_per_call():
    """CUDA's nll_loss2d without a reduction never writes total_weight (eager returned 0.008 and 0.174
    from memory on an H200): the case checks only the loss there, and total_weight where it is defined."""
    from conformance.harness.runner import expect
    from conformance.specs.catalog import SPECS
    from conformance.specs.samples import Sample

    x = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(0)).log_softmax(1)
    target = torch.randint(0, 3, (2, 4, 5), generator=torch.Generator().manual_seed(1))
    spec = SPECS["aten.nll_loss2d_forward.default"]
    unreduced = expect(spec, "alone", Sample((x, target, None, 0, -100), {}, "none"), False, 0)
    averaged = expect(spec, "alone", Sample((x, target, None, 1, -100), {}, "mean"), False, 0)
    assert [tuple(r.shape) for r in unreduced.output] == [(2, 4, 5)]
    assert [tuple(r.shape) for r in averaged.output] == [(), ()]
