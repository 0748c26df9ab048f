"""Calls swapped before AOTAutograd (`fuser/capture/rewrites.py`): multi_margin_loss's stock decomposition
runs at the Autograd key, above the fuser's decomposition table, and turned eager's skipped nan terms into
a nan loss (the conformance full tier, float64 on an H100 and then the CPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuser  # noqa: F401  (registers the backend)

NAN, INF = float("nan"), float("inf")
# Rows whose terms eager skips: a nan score, inf - inf, -inf (squared under p=2), and an ordinary row.
X = torch.tensor(
    [
        [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0],
        [NAN, 1.0, -1.0, 0.5, -2.5, 3.0, 0.1],
        [-0.0, INF, -INF, NAN, 1.0, -1.0, 0.5],
        [0.3, -0.7, 1.2, 0.05, -1.1, 2.0, 0.4],
    ],
    dtype=torch.float64,
)
TARGET = torch.tensor([0, 2, 5, 3])
WEIGHT = torch.tensor([0.5, 1.0, 2.0, 0.1, 1.5, INF, 1.0], dtype=torch.float64)

CALLS = {
    "functional mean": lambda x, t: F.multi_margin_loss(x, t),
    "functional p=2 weight none": lambda x, t: F.multi_margin_loss(
        x, t, p=2, weight=WEIGHT.to(x.dtype), reduction="none"
    ),
    "functional sum margin": lambda x, t: F.multi_margin_loss(x, t, margin=0.5, reduction="sum"),
    "module": lambda x, t: torch.nn.MultiMarginLoss(p=2)(x, t),
    "aten": lambda x, t: torch.ops.aten.multi_margin_loss(x, t, 1, 1, None, 0),
    "aten default": lambda x, t: torch.ops.aten.multi_margin_loss.default(x, t, p=2, reduction=2),
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_multi_margin_loss_skips_the_terms_eager_skips_in_value_and_gradient(name, dtype):
    call = CALLS[name]
    x = X.to(dtype).requires_grad_()
    eager = call(x, TARGET)
    (eager_grad,) = torch.autograd.grad(eager.sum(), x)
    torch._dynamo.reset()
    compiled_x = X.to(dtype).requires_grad_()
    compiled = torch.compile(call, backend="fuser", fullgraph=True)(compiled_x, TARGET)
    (compiled_grad,) = torch.autograd.grad(compiled.sum(), compiled_x)
    torch.testing.assert_close(compiled, eager, equal_nan=True)
    torch.testing.assert_close(compiled_grad, eager_grad, equal_nan=True)
    assert not compiled.isnan().any()  # eager's loss has no nan: every nan term is skipped
