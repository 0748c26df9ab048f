"""A slice's gradient is fused: `full` (its zeros) and `slice_scatter` are lowered, so the backward of
`x[a:b:s]` is one kernel, not two split by eager calls.

Found by the fuzzer (seed 2611265, docs/fuzz.md): `atan2(v0[::2], v0)` over one bfloat16 element has a
gradient of two cancelling terms. With `slice_scatter` eager, one term was stored as bfloat16 at the
kernel boundary and the other kept in float32, so the gradient came out 0.0017 where eager, Inductor and
float64 give 0.
"""

from __future__ import annotations

import pytest
import torch
from shared_checks import fused_matches_eager

import fuser
from fuser.explain import collecting


def gradients(fn, x: torch.Tensor, seed: int = 0):
    """fn's result and x's gradient, eager and compiled, and what the fuser compiled (a forward and its
    backward: the shared check, `fused_matches_eager`, runs a forward only), asserting kernels ran."""
    results = []
    for run in (fn, torch.compile(fn, backend="fuser", dynamic=False)):
        before = fuser.counters()["kernels_launched"]
        leaf = x.detach().clone().requires_grad_()
        with collecting() as graphs:
            out = run(leaf)
            generator = torch.Generator().manual_seed(seed)  # the same weights for both runs
            weight = torch.randn(out.shape, generator=generator, dtype=torch.float64).to(out)
            (grad,) = torch.autograd.grad(out, leaf, weight)
        results.append((out, grad, graphs))
    assert fuser.counters()["kernels_launched"] > before, "no kernel ran: eager checked against eager"
    return results


def test_the_bfloat16_atan2_gradient_cancels_exactly_as_in_eager(device):
    x = torch.tensor([0.3], dtype=torch.bfloat16, device=device)
    (_, want, _), (_, got, graphs) = gradients(lambda v: torch.atan2(v[::2], v), x)
    assert want.item() == 0.0
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert [c for g in graphs for c in g.eager_calls] == []


SLICES = {
    "every other": (lambda x: x[::2] * 3, (7,)),
    "step 3 from 1": (lambda x: x[1:5:3].exp(), (9, 4)),
    "negative start": (lambda x: x[:, -3:].sin(), (5, 6)),
    "end past the size": (lambda x: x[:, 2:100:2].cos(), (5, 6)),
    "of a transpose": (lambda x: x.t()[1::2] * 2, (6, 5)),
    "two interleaved halves": (lambda x: (x[..., ::2] * x[..., 1::2]).sum(-1), (3, 8)),
    "into a softmax": (lambda x: torch.softmax(x[:, 1:], -1), (4, 9)),
    "empty": (lambda x: x[:, 3:3] + 1, (4, 5)),
    "rotary halves": (lambda x: torch.cat([-x[..., 3:], x[..., :3]], -1) * x, (2, 3, 6)),
}


FLOATING_ONLY = {"into a softmax"}  # eager has no integer softmax
CASES = [
    (name, dtype)
    for name in SLICES
    for dtype in (torch.float32, torch.bfloat16, torch.int64)
    if dtype.is_floating_point or name not in FLOATING_ONLY
]


@pytest.mark.parametrize(("name", "dtype"), CASES, ids=str)
def test_a_sliced_programs_gradient_matches_eager_with_no_eager_calls(name, dtype, device):
    fn, shape = SLICES[name]
    values = torch.randn(shape, dtype=torch.float64)
    if not dtype.is_floating_point:  # a forward of integers: no gradient, the slice's reads checked
        x = (values * 10).to(dtype).to(device)
        fused_matches_eager(fn, x, kernels=0 if fn(x).numel() == 0 else None)  # an empty result: no launch
        return
    (want_out, want, _), (got_out, got, graphs) = gradients(fn, values.to(dtype).to(device))
    tolerance = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(got_out, want_out, **tolerance)
    torch.testing.assert_close(got, want, **tolerance)
    eager = [c for g in graphs for c in g.eager_calls]
    assert not {"aten.full.default", "aten.slice_scatter.default"} & set(eager), eager


def test_a_scatter_into_a_buffer_written_elsewhere_keeps_the_rest(device):
    base = torch.arange(24.0, device=device).reshape(4, 6)
    src = -torch.arange(8.0, device=device).reshape(4, 2)
    fn = lambda b, s: torch.slice_scatter(b * 2, s + 1, dim=1, start=-5, end=4, step=2)  # noqa: E731
    report = fused_matches_eager(fn, base, src, kernels=1, rtol=0, atol=0)
    assert report.num_kernels == 1
