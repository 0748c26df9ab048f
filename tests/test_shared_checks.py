"""The tests' shared check (tests/support/shared_checks.py) fails what it is there to catch."""

from __future__ import annotations

import pytest
import torch
from shared_checks import fused_matches_eager


def test_the_shared_check_fails_a_program_run_eagerly_a_wrong_kernel_and_a_wrong_count(monkeypatch):
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    with pytest.raises(AssertionError, match="no kernel ran"):
        fused_matches_eager(lambda t: t @ t, x)  # a matmul alone: the fuser leaves it to eager
    assert fused_matches_eager(lambda a, b: a + b, x, y, kernels=1).num_kernels == 1
    with pytest.raises(AssertionError, match="1 kernel launches, expected 2"):
        fused_matches_eager(lambda a, b: a + b, x, y, kernels=2)
    # The planted wrong lowering changes add's kernels, so its entry is stale: fuse it on purpose.
    monkeypatch.setenv("FUSER_UNVALIDATED", "fuse")
    monkeypatch.setenv("FUSER_TESTING_WRONG_LOWERING", "aten.add.Tensor")
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        fused_matches_eager(lambda a, b: a + b, x, y)
