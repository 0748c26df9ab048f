"""Horizontal fusion (`fuser.plan.horizontal`) apart from optimizers: which kernels it may batch. What it does
for a compiled optimizer step (one or two kernels, any number of tensors) is in test_optimizers.py."""

from __future__ import annotations

import pytest
import torch

import fuser


@pytest.fixture(autouse=True)
def horizontal_on(monkeypatch):
    # On CUDA the fuser leaves horizontal fusion off until a recorded GPU run validates it: these
    # tests are that validation wherever they run.
    monkeypatch.setenv("FUSER_HORIZONTAL", "1")


def test_kernels_of_one_source_over_different_dtypes_are_not_batched(device):
    # The two negations generate the same source (pointer dtypes are the launch's arguments), but one
    # horizontal kernel casts its addresses to one dtype: an int64 tensor read as float32 came out wrong.
    def negate_both(a, b):
        return torch.neg(a), torch.neg(b)

    a = torch.randn(7, device=device)
    b = torch.randint(-100, 100, (5,), dtype=torch.int64, device=device)
    report = fuser.explain(negate_both, a, b)
    assert report.num_kernels == 2
    torch.testing.assert_close(report.result, negate_both(a, b))
