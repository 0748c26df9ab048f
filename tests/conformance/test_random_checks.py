"""The random ops' statistical checks judge a backend's draws against eager's own distribution: eager's
draws pass at the full tier's largest size in every floating dtype, and a shifted distribution fails."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.random import uniform_check

FULL_TIER_SIZE = (1823, 781)  # the full tier's largest sample: 1.4 million elements


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-2.0, 3.0)])
def test_eager_s_own_uniform_draws_pass_the_mean_check_at_the_largest_size(dtype, low, high):
    # Eager draws bfloat16 on a grid of 2^8 values (rand's mean 0.498): 6.6 sigma from (low + high) / 2.
    check = uniform_check(low, high)
    for seed in range(3):
        torch.manual_seed(seed)
        draws = torch.empty(FULL_TIER_SIZE, dtype=dtype).uniform_(low, high)
        assert check(None, draws, None, None) == "", (dtype, seed)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_range_a_hundredth_too_narrow_fails_the_mean_check(dtype):
    torch.manual_seed(0)
    narrowed = torch.rand(FULL_TIER_SIZE, dtype=dtype) * 0.98  # [0, 0.98): the mean 0.01 low
    assert "mean" in uniform_check(0.0, 1.0)(None, narrowed, None, None)


def test_the_check_draws_its_reference_without_moving_the_program_s_generator():
    draws = torch.rand(2000, dtype=torch.bfloat16) * 7
    torch.manual_seed(5)
    expected = torch.rand(4)
    torch.manual_seed(5)
    uniform_check(0.0, 7.0)(None, draws, None, None)
    assert torch.equal(torch.rand(4), expected)


def test_native_dropout_s_gradient_check_reads_past_a_nan_input_and_still_catches_a_missing_scale():
    """from_reduction's amax sends nan back to a nan input (eager's gradient too: the full tier, session 41);
    elsewhere the gradient must be the seed, masked and scaled."""
    from conformance.specs.random import P, native_dropout_check
    from conformance.specs.samples import Sample

    x = torch.tensor([1.0, float("nan"), -2.0, 3.0, float("inf")])
    mask = torch.tensor([True, True, False, True, True])
    seed = torch.tensor([0.5, -1.0, 2.0, -3.0, 4.0])
    right = seed * mask / (1 - P)
    sample = Sample((x, P, True), {}, "")
    through_amax = torch.where(x.isnan(), float("nan"), right)
    assert native_dropout_check(sample, (x, mask), [through_amax], [seed]) == ""
    assert "not scaled" in native_dropout_check(sample, (x, mask), [seed * mask], [seed])
