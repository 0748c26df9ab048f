"""The oracle: exact integers, nan and inf positions, dtype tolerances, and the float64 fallback."""

from __future__ import annotations

import math

import torch

from conformance.oracle import compare


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
