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


def test_the_shared_check_judges_results_by_a_rule_given_instead_and_still_counts_launches(monkeypatch):
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    judged = []
    report = fused_matches_eager(lambda a, b: (a + b, a - b), x, y, compare=lambda *pair: judged.append(pair))
    ((fused, eager),) = judged  # once, with every result of each, flattened
    assert len(fused) == len(eager) == 2
    assert all(map(torch.equal, fused, report.result)) and all(map(torch.equal, eager, (x + y, x - y)))

    def unequal(fused, eager):
        raise AssertionError("the rule rejects them")

    with pytest.raises(AssertionError, match="the rule rejects them"):
        fused_matches_eager(lambda a, b: a + b, x, y, compare=unequal)
    with pytest.raises(AssertionError, match="no kernel ran"):
        fused_matches_eager(lambda t: t @ t, x, compare=lambda fused, eager: None)
    # Instead of assert_close, not as well: a rule that accepts a wrong kernel's results passes it.
    monkeypatch.setenv("FUSER_UNVALIDATED", "fuse")
    monkeypatch.setenv("FUSER_TESTING_WRONG_LOWERING", "aten.add.Tensor")
    fused_matches_eager(lambda a, b: a + b, x, y, compare=lambda fused, eager: None)
