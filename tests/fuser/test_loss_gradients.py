"""The regression losses' gradients are eager's (`fuser/capture/backend.py`): smooth_l1_loss's stock
decomposition took sign(nan) = 0, so a nan input got a 0 gradient where eager's is nan, and at beta = 0 a zero
difference got 0 where eager's is -grad; mse_loss's, huber_loss's and smooth_l1_loss's computed 1 / numel
while tracing, so a zero-size input with reduction='mean' did not compile. A ledger entry for the zero-size
failure hid the nan on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuser

NAN, INF = float("nan"), float("inf")
DIFFERENCES = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-30, 3.0e38, -3.0e38]
LOSSES = {
    "smooth_l1 beta 1": lambda x, t, reduction: F.smooth_l1_loss(x, t, reduction=reduction),
    "smooth_l1 beta 0.5": lambda x, t, reduction: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.5),
    "smooth_l1 beta 0": lambda x, t, reduction: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.0),
    "huber": lambda x, t, reduction: F.huber_loss(x, t, reduction=reduction, delta=0.5),
    "mse": lambda x, t, reduction: F.mse_loss(x, t, reduction=reduction),
}


def gradients(loss, x, target, reduction, compiled: bool):
    x = x.clone().requires_grad_()
    call = fuser.compile(loss, strict=True) if compiled else loss
    (gradient,) = torch.autograd.grad(call(x, target, reduction).sum(), x)
    return gradient


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_a_regression_loss_s_gradient_is_eager_s_at_nan_inf_and_the_branch_edges(
    name, reduction, dtype, device
):
    x = torch.tensor(DIFFERENCES, dtype=dtype, device=device)
    target = torch.zeros_like(x)
    want = gradients(LOSSES[name], x, target, reduction, compiled=False)
    got = gradients(LOSSES[name], x, target, reduction, compiled=True)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(got.isnan(), want.isnan())


@pytest.mark.parametrize("name", LOSSES)
def test_a_zero_size_input_with_mean_reduction_compiles_and_has_an_empty_gradient(name, device):
    x = torch.empty(0, 3, device=device)
    got = gradients(LOSSES[name], x, torch.empty_like(x), "mean", compiled=True)
    assert got.shape == (0, 3) and got.dtype == x.dtype
