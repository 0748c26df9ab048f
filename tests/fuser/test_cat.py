"""`cat` is fused: each element is read from the input that holds its position (`fuser.lower.views.scatter_pieces`),
so a rotary embedding's `cat((-x2, x1))` is computed inside the kernel that uses it, not by an eager call
between two kernels (llama's graphs had 9 eager cats, the zoo's seven models 27)."""

from __future__ import annotations

import pytest
import torch
from shared_checks import fused_matches_eager

import fuser  # noqa: F401  (registers the backend)
from fuser.explain import collecting


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_rotary_embedding_is_one_kernel_forward_and_backward(dtype, device):
    x = torch.randn(2, 3, 5, 8, dtype=dtype, device=device)
    angles = torch.randn(5, 8, dtype=torch.float64)
    cos, sin = angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)
    leaf, eager_leaf = x.clone().requires_grad_(), x.clone().requires_grad_()
    weight = torch.randn(x.shape, dtype=torch.float64).to(dtype).to(device)
    with collecting() as graphs:
        out = torch.compile(rotary, backend="fuser", dynamic=False)(leaf, cos, sin)
        (grad,) = torch.autograd.grad(out, leaf, weight)
    want = rotary(eager_leaf, cos, sin)
    (want_grad,) = torch.autograd.grad(want, eager_leaf, weight)
    tolerance = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out, want, **tolerance)
    torch.testing.assert_close(grad, want_grad, **tolerance)
    # On CUDA autograd compiles the backward in another thread, which `collecting` does not see.
    assert graphs and all(len(g.kernels) == 1 and not g.eager_calls for g in graphs)
    assert len(graphs) == 2 or device == "cuda"


CATS = {
    "last dim, three inputs": (lambda a, b: torch.cat((a, b * 2, a + 1), -1), (3, 4), (3, 5)),
    "first dim": (lambda a, b: torch.cat((a.t(), b.t()), 0).exp(), (3, 4), (3, 5)),
    "an empty input between": (lambda a, b: torch.cat((a, b[:, :0], b), 1) * 2, (3, 4), (3, 5)),
    "a legacy 1-d empty input": (
        lambda a, b: torch.cat((a, torch.zeros(0, dtype=a.dtype, device=a.device), b), 1),
        (2, 3),
        (2, 2),
    ),
    "the middle dim of a transpose": (
        lambda a, b: torch.cat((a, b), 1).transpose(0, 2) * 3,
        (2, 3, 4),
        (2, 1, 4),
    ),
    "one input": (lambda a, b: torch.cat((a,), 0) * b.sum(), (5,), (1,)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("name", CATS)
def test_cat_matches_eager_with_no_eager_call(name, dtype, device):
    fn, a_shape, b_shape = CATS[name]
    a = (torch.randn(a_shape) * 5).to(dtype).to(device)
    b = (torch.randn(b_shape) * 5).to(dtype).to(device)
    assert "aten.cat.default" not in fused_matches_eager(fn, a, b).eager_calls


def test_cat_promotes_its_inputs_to_the_result_dtype_as_eager_does(device):
    a = torch.tensor([[2**24 + 1, -3]], dtype=torch.int64, device=device)  # rounds in float32
    b = torch.tensor([[0.1, 1.5]], dtype=torch.bfloat16, device=device)
    c = torch.tensor([[True, False]], device=device)
    fn = lambda a, b, c: torch.cat((a, b, c), 0) * 1  # noqa: E731
    report = fused_matches_eager(fn, a, b, c, rtol=0, atol=0)  # the dtype eager's, which is bfloat16
    assert report.result.dtype == torch.bfloat16
    assert report.eager_calls == []


def test_a_cat_of_only_empty_inputs_is_empty_and_fused(device):
    a = torch.zeros(0, 3, device=device)
    fn = lambda a: torch.cat((a, a, torch.zeros(0, device=device)), 0) + 1  # noqa: E731
    report = fused_matches_eager(fn, a, kernels=0)  # an empty result: nothing to launch
    assert report.num_kernels >= 1  # but fused
    assert "aten.cat.default" not in report.eager_calls


def test_an_input_given_twice_is_read_at_both_places(device):
    # all_input_nodes lists x once: reading the sources from it put y's rows where x's second copy goes.
    x, y = torch.randn(3, 4, device=device), torch.randn(2, 4, device=device)
    fn = lambda x, y: torch.cat((x, y, x), 0) * 2  # noqa: E731
    assert fused_matches_eager(fn, x, y).eager_calls == []
