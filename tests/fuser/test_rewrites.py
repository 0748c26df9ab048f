"""Calls swapped before AOTAutograd (`fuser/capture/rewrites.py`): multi_margin_loss's stock decomposition
runs at the Autograd key, above the fuser's decomposition table, and turned eager's skipped nan terms into
a nan loss (the conformance full tier, float64 on an H100 and then the CPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuser

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


# The resampling ops run eager's kernels whole (opaque ops `fuser::*`): PyTorch's decompositions, at the
# Autograd key, weigh an infinite neighbour by 0, so bilinear upsampling gave nan where eager gives inf or a
# finite value. Users reach them through F.interpolate, which Dynamo keeps whole in its graph.
IMAGE = torch.tensor([[[[1.0, INF, 0.5], [0.5, 2.0, -INF], [NAN, 3.0, 4.0]]]]).repeat(2, 3, 1, 1)
RESAMPLING = {
    "interpolate bilinear size aligned": lambda x: F.interpolate(
        x, size=(5, 7), mode="bilinear", align_corners=True
    ),
    "interpolate bilinear scale": lambda x: F.interpolate(x, scale_factor=(2, 1.5), mode="bilinear"),
    "module bilinear": lambda x: torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(x),
    "upsample_bilinear": lambda x: F.upsample_bilinear(x, size=(4, 6)),
    "aten bilinear vec": lambda x: torch.ops.aten.upsample_bilinear2d.vec(x, [5, 7], True, None),
    "interpolate nearest": lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"),
    "interpolate nearest-exact": lambda x: F.interpolate(x, size=(7, 2), mode="nearest-exact"),
}


@pytest.mark.parametrize("name", RESAMPLING)
@pytest.mark.parametrize("channels_last", [False, True])
def test_resampling_runs_eager_s_kernels_in_value_gradient_and_layout(name, channels_last):
    call = RESAMPLING[name]
    image = IMAGE.to(memory_format=torch.channels_last) if channels_last else IMAGE
    x = image.clone().requires_grad_()
    eager = call(x * 2)
    seed = torch.randn_like(eager)
    (eager_grad,) = torch.autograd.grad(eager, x, seed)
    torch._dynamo.reset()
    compiled_x = image.clone().requires_grad_()
    compiled = torch.compile(lambda x: call(x * 2), backend="fuser", fullgraph=True)(compiled_x)
    (compiled_grad,) = torch.autograd.grad(compiled, compiled_x, seed)
    torch.testing.assert_close(compiled, eager, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(compiled_grad, eager_grad, equal_nan=True, rtol=0, atol=0)
    assert compiled.stride() == eager.stride() and compiled_grad.stride() == eager_grad.stride()


def test_resampling_is_one_eager_call_and_the_swap_does_not_outlive_the_trace():
    original = torch._C._nn.upsample_bilinear2d
    report = fuser.explain(
        lambda x: F.interpolate(x.relu(), scale_factor=2, mode="bilinear").sigmoid(), IMAGE
    )
    assert [call.split(":")[0] for call in report.eager_calls] == ["fuser.upsample_bilinear2d.default"]
    assert torch._C._nn.upsample_bilinear2d is original


def test_the_size_overload_is_left_as_it_is():
    """torch._C._nn's function also takes the size overload's arguments (per-dim scales, not a list): not
    swapped, it reaches AOTAutograd as before."""
    call = lambda x: torch._C._nn.upsample_bilinear2d(x, [5, 7], False, 1.7, 2.4)  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(call, backend="fuser", fullgraph=True)(IMAGE.nan_to_num(posinf=9.0, neginf=-9.0))
    torch.testing.assert_close(compiled, call(IMAGE.nan_to_num(posinf=9.0, neginf=-9.0)))
