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
