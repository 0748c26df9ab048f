"""Ops added through the validation workflow (docs/validation.md) are fused on cpu by default — no
opt-in — because the committed manifest validates them, and they match eager there."""

from __future__ import annotations

import pytest
import torch

import fuser
from fuser.validate import validation

# op name -> the function a user calls
ENABLED = {
    "aten.i0.default": torch.i0,
    "aten.special_i0e.default": torch.special.i0e,
    "aten.special_i1.default": torch.special.i1,
}


@pytest.mark.parametrize("op", sorted(ENABLED))
def test_enabled_by_the_committed_manifest(op, monkeypatch):
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)
    validation.reload()
    entry = validation.load("cpu").entries[op]
    assert entry.fresh and "float32" in entry.dtypes
    # i0e's first lowering gave nan from |x| ~ 90 (0 * inf): large values and inf are here for it.
    x = torch.tensor([0.0, -0.0, 0.5, -3.0, 8.0, -8.5, 30.0, 85.0, -100.0, 1e4, float("inf"), float("nan")])
    report = fuser.explain(ENABLED[op], x)
    assert report.num_kernels == 1 and report.fallbacks == []
    torch.testing.assert_close(report.result, ENABLED[op](x), equal_nan=True)
