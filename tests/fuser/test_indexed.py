"""gather and scatter of a value are fused (`fuser.lower.ops.IndexedOp`): the kernel loads the positions its index
tensor holds and reads (gather) or writes (scatter) there, so a cross-entropy's pick of each row's target
and its gradient's one-hot are computed inside the kernels around them, not by eager calls between them
(issue 29). Every case checks the values against eager and that no op ran eagerly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from shared_checks import fused_matches_eager

import fuser
from fuser.explain import collecting


def positions(high: int, shape, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


GATHERS = {
    "last dim": (lambda x, i: torch.gather(x, 1, i), (6, 9), (6, 4), 9),
    "first dim": (lambda x, i: torch.gather(x, 0, i), (6, 9), (3, 9), 6),
    "index smaller along the other dim": (lambda x, i: torch.gather(x, 1, i), (6, 9), (4, 2), 9),
    "of a fused producer": (lambda x, i: torch.gather(x.exp() * 2, 1, i) + 1, (5, 7), (5, 3), 7),
    "of a transpose": (lambda x, i: torch.gather(x.t(), 0, i), (7, 5), (4, 7), 5),
    "middle dim of 3": (lambda x, i: torch.gather(x, 1, i).sin(), (2, 5, 3), (2, 4, 3), 5),
    "of a row kernel's result": (lambda x, i: torch.gather(x.log_softmax(1), 1, i), (5, 33), (5, 1), 33),
    "along the rows of a row kernel": (
        lambda x, i: torch.gather(x - x.amax(1, keepdim=True), 0, i),
        (5, 7),
        (5, 7),
        5,
    ),
}


# Integers where the case reads without floating math.
READS = ("last dim", "first dim", "index smaller along the other dim", "of a transpose")
FLOATS = (torch.float32, torch.bfloat16)


@pytest.mark.parametrize(
    "case, dtype",
    [(c, d) for c in sorted(GATHERS) for d in FLOATS + ((torch.int64,) if c in READS else ())],
    ids=str,
)
def test_gather_matches_eager_in_a_kernel(case, dtype, device):
    fn, shape, index_shape, high = GATHERS[case]
    x = (torch.randn(shape) * 10).to(dtype).to(device)
    index = positions(high, index_shape).to(device)
    assert not fused_matches_eager(fn, x, index).eager_calls


SCATTERS = {
    "one position a row": (lambda x, i: x.scatter(1, i, -1.5), (6, 9), (6, 1)),
    "three distinct positions a row": (lambda x, i: (x * 2).scatter(1, i, 4.0) + 1, (6, 9), (6, 3)),
    "repeated positions": (lambda x, i: x.scatter(1, i, 7), (4, 9), (4, 5)),
    "index shorter along the other dim": (lambda x, i: x.scatter(1, i, 3), (6, 9), (4, 2)),
    "first dim": (lambda x, i: x.t().scatter(0, i, 2) * 3, (9, 6), (1, 9)),
    "a one-hot of a row kernel": (
        lambda x, i: x.softmax(1) - torch.zeros_like(x).scatter(1, i, 1.0),
        (5, 33),
        (5, 1),
    ),
}


@pytest.mark.parametrize(
    "case, dtype",
    [(c, d) for c in sorted(SCATTERS) for d in FLOATS + ((torch.int32,) if "row" not in c else ())],
    ids=str,
)
def test_scatter_of_a_value_matches_eager_in_a_kernel(case, dtype, device):
    fn, shape, index_shape = SCATTERS[case]
    dim = 0 if "first dim" in case else 1
    x = (torch.randn(shape) * 10).to(dtype).to(device)
    high = shape[::-1][dim] if "first dim" in case else shape[dim]
    index = positions(high, index_shape, seed=1).to(device)
    if "distinct" in case:
        index = torch.stack([torch.randperm(high)[:3] for _ in range(shape[0])]).to(device)
    assert not fused_matches_eager(fn, x, index).eager_calls


def test_a_gather_out_of_range_reads_nan_not_a_neighbour(device):
    # Eager raises; a kernel cannot stop, and Triton keeps its asserts only in debug mode. A clamped read
    # would return the last element as if it were the answer: the float result is nan instead.
    x = torch.randn(3, 5, device=device)
    index = torch.tensor([[1], [5], [-1]], device=device)
    report = fuser.explain(lambda x, i: torch.gather(x, 1, i), x, index)
    result = report.result
    assert report.num_kernels and not report.eager_calls
    assert result[0, 0] == x[0, 1]
    assert result[1:].isnan().all()


def test_a_scatter_out_of_range_is_nan_along_its_row_not_a_silent_no_op(device):
    # Eager raises; a scatter that wrote nothing where its position is out of range would look right.
    x = torch.randn(3, 5, device=device)
    index = torch.tensor([[1, 2], [5, 0], [4, -1]], device=device)
    report = fuser.explain(lambda x, i: x.scatter(1, i, 2.0), x, index)
    result = report.result
    assert report.num_kernels and not report.eager_calls
    torch.testing.assert_close(result[0], x[0].scatter(0, index[0], 2.0))
    assert result[1:].isnan().all()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_forward_and_backward_fuse_whole(reduction, smoothing, device):
    """A language model's loss: bf16 logits, fp32 math, ignored targets. The pick of each row's target
    (gather) and the gradient's one-hot (scatter) were eager calls, with a kernel writing zeros for the
    scatter: five kernels and two eager calls became three kernels."""

    def loss(logits, targets):
        return F.cross_entropy(
            logits.float(), targets, ignore_index=3, label_smoothing=smoothing, reduction=reduction
        )

    logits = torch.randn(17, 300, dtype=torch.bfloat16, device=device)
    targets = positions(300, (17,)).to(device)
    targets[[2, 9]] = 3
    leaf, eager_leaf = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    weight = torch.rand(17 if reduction == "none" else (), device=device)
    with collecting() as graphs:
        out = torch.compile(loss, backend="fuser", dynamic=False)(leaf, targets)
        (grad,) = torch.autograd.grad(out, leaf, weight)
    want = loss(eager_leaf, targets)
    (want_grad,) = torch.autograd.grad(want, eager_leaf, weight)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(grad, want_grad)
    assert not [call for g in graphs for call in g.eager_calls]
    # On CUDA autograd compiles the backward in another thread, which `collecting` does not see.
    if device == "cpu":
        forward, backward = (len(g.kernels) for g in graphs)
        # At most two per direction (issue 29); with the default min-cut partitioner, the smoothed loss's
        # backward recomputes the log-probabilities' row statistics in a kernel of their own.
        assert forward <= 2 and backward <= 2


def test_with_recompute_a_cross_entropy_saves_no_log_probabilities_for_its_backward(device):
    """options={"recompute": True}: AOTAutograd's min-cut partitioner recomputes the fp32 log-probabilities
    in the backward's kernel from the logits and two numbers a row, where the default saves them: 4 bytes
    an element written and read back, twice the bf16 logits themselves."""

    def loss(logits, targets):
        return F.cross_entropy(logits.float(), targets)

    logits = torch.randn(9, 500, dtype=torch.bfloat16, device=device)
    targets = positions(500, (9,)).to(device)
    saved = {}
    for recompute in (False, True):
        leaf = logits.clone().requires_grad_()
        shapes = saved[recompute] = []

        def pack(tensor, shapes=shapes):
            shapes.append((tuple(tensor.shape), tensor.dtype))
            return tensor

        compiled = torch.compile(loss, backend="fuser", dynamic=False, options={"recompute": recompute})
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            out = compiled(leaf, targets)
        (grad,) = torch.autograd.grad(out, leaf)
        eager_leaf = logits.clone().requires_grad_()
        (want,) = torch.autograd.grad(loss(eager_leaf, targets), eager_leaf)
        torch.testing.assert_close(out, loss(logits, targets))
        torch.testing.assert_close(grad, want)
        torch._dynamo.reset()
    assert ((9, 500), torch.float32) in saved[False]
    assert ((9, 500), torch.float32) not in saved[True] and ((9, 500), torch.bfloat16) in saved[True]


@pytest.mark.parametrize("weighted", [False, True])
def test_a_nan_gradient_of_a_row_s_loss_reaches_only_its_target_as_eager_s(weighted, device):
    """nll_loss's backward writes each row's gradient at its target, the rest of the row 0: eager's kernels
    do, where the stock decomposition multiplied a one-hot tensor by the gradient and made the whole row nan
    (found by the full conformance tier's `into_reduction` context, whose max hands a nan on)."""
    x = torch.randn(6, 9, device=device, requires_grad=True)
    targets = torch.tensor([0, 8, 3, -100, 4, 4], device=device)
    weight = torch.rand(9, device=device) if weighted else None
    grad = torch.tensor([1.0, float("nan"), float("inf"), float("nan"), -2.0, 0.0], device=device)

    def loss(x, targets):
        return F.nll_loss(x, targets, weight=weight, reduction="none")

    (want,) = torch.autograd.grad(loss(x, targets), x, grad)
    before = fuser.counters()["kernels_launched"]
    (got,) = torch.autograd.grad(torch.compile(loss, backend="fuser")(x, targets), x, grad)
    assert fuser.counters()["kernels_launched"] - before >= 2  # forward and backward ran fused
    torch.testing.assert_close(got, want, equal_nan=True)
    assert got[1].isnan().sum() == 1 and not got[3].isnan().any()


def test_a_nan_gradient_reaches_only_its_target_in_a_2d_loss_too(device):
    x = torch.randn(2, 5, 3, 4, device=device, requires_grad=True)
    targets = torch.randint(0, 5, (2, 3, 4), generator=torch.Generator().manual_seed(0)).to(device)
    targets[1, 2, 3] = -100
    grad = torch.ones(2, 3, 4, device=device)
    grad[0, 1, 2], grad[1, 2, 3] = float("nan"), float("nan")

    def loss(x, targets):
        return F.nll_loss(x, targets, reduction="none")

    (want,) = torch.autograd.grad(loss(x, targets), x, grad)
    before = fuser.counters()["kernels_launched"]
    (got,) = torch.autograd.grad(torch.compile(loss, backend="fuser")(x, targets), x, grad)
    assert fuser.counters()["kernels_launched"] - before >= 2
    torch.testing.assert_close(got, want, equal_nan=True)
    assert got.isnan().sum() == 1
