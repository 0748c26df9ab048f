"""A kernel that sums a row kernel's columns is computed with it (`fuser.plan.partition.attach_column_sums`): the
row kernel walks its rows in groups, summing the columns as it reads them, and a second launch adds the
groups' sums. A layer norm's backward read its gradient and input twice, once for the input's gradient
(a row kernel) and once for the weight's and bias's (sums over the rows): issue 29."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from shared_checks import fused_matches_eager

from fuser.runtime import launch_config


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)  # the same inputs every run: the comparisons' tolerances hold for these


@pytest.fixture
def many_groups(monkeypatch):
    """Blocks of 8 rows of 129 columns, in 3 groups: each group walks several blocks, the last one short."""
    monkeypatch.setattr(launch_config, "CPU_ROW_ELEMENTS", 8 * 256)
    monkeypatch.setattr(launch_config, "CPU_ROW_GROUPS", 3)
    monkeypatch.setattr(launch_config, "GPU_GROUP_ROW_ELEMENTS", 8 * 256)
    monkeypatch.setattr(launch_config, "GPU_ROW_GROUPS", 3)


def row_and_column_sums(x, y):
    return (x * y).sum(1), x.sum(0), (x * y).sum(0)


def layer_norm_gradients(x, weight, bias, grad):
    y = F.layer_norm(x, x.shape[-1:], weight, bias, eps=1e-5)
    return torch.autograd.grad(y, (x, weight, bias), grad)


def rms_norm_gradients(x, weight, grad):
    # LLaMA's form: statistics in float32, the result cast back before the weight.
    variance = x.float().pow(2).mean(-1, keepdim=True)
    y = (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * weight
    return torch.autograd.grad(y, (x, weight), grad)


def kinds(report) -> list[str]:
    return [k.kind for k in report.kernels]


def test_a_rows_sums_and_its_columns_sums_are_one_kernel_of_two_launches(device, many_groups):
    x, y = (torch.randn(37, 129, device=device) for _ in range(2))
    report = fused_matches_eager(row_and_column_sums, x, y, kernels=2)
    assert kinds(report) == ["row_groups"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_layer_norms_backward_reads_its_rows_once(device, many_groups, dtype):
    x, grad = (torch.randn(37, 129, device=device, dtype=dtype) for _ in range(2))
    weight, bias = (torch.randn(129, device=device, dtype=dtype) for _ in range(2))
    x.requires_grad_(), weight.requires_grad_(), bias.requires_grad_()
    tolerance = {} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 0.25}  # bf16 sums of 37 rows
    # CUDA autograd runs a backward (and compiles its graph) on its own thread, where the report does not
    # see it: here it runs on this one.
    with torch.autograd.set_multithreading_enabled(False):
        report = fused_matches_eager(layer_norm_gradients, x, weight, bias, grad, kernels=3, **tolerance)
    assert kinds(report) == ["persistent", "row_groups"]  # forward; backward: input, weight, bias grads


def test_an_rms_norms_backward_reads_its_rows_once(device, many_groups):
    x, grad = (torch.randn(37, 129, device=device, dtype=torch.bfloat16) for _ in range(2))
    weight = torch.randn(129, device=device, dtype=torch.bfloat16)
    x.requires_grad_(), weight.requires_grad_()
    with torch.autograd.set_multithreading_enabled(False):
        report = fused_matches_eager(rms_norm_gradients, x, weight, grad, kernels=3, rtol=2e-2, atol=0.25)
    assert kinds(report) == ["persistent", "row_groups"]


def test_every_row_counts_once_whatever_the_groups(device, monkeypatch):
    # Row r holds r + 1 in every column: the column sums are exact (37 * 38 / 2) only if every row of every
    # group is added once, the short last block's masked rows none.
    x = (torch.arange(37, device=device, dtype=torch.float32) + 1)[:, None].expand(37, 129).contiguous()
    y = torch.ones_like(x)
    for elements, groups in ((256, 1), (8 * 256, 3), (8 * 256, 5), (2**16, 4)):
        monkeypatch.setattr(launch_config, "CPU_ROW_ELEMENTS", elements)
        monkeypatch.setattr(launch_config, "CPU_ROW_GROUPS", groups)
        monkeypatch.setattr(launch_config, "GPU_GROUP_ROW_ELEMENTS", elements)
        monkeypatch.setattr(launch_config, "GPU_ROW_GROUPS", groups)
        torch._dynamo.reset()
        report = fused_matches_eager(row_and_column_sums, x, y, kernels=2, rtol=0, atol=0)
        assert report.result[1][0].item() == 37 * 38 / 2


def test_no_rows_sum_the_columns_to_zero(device):
    x, y = (torch.randn(0, 129, device=device) for _ in range(2))
    fused_matches_eager(row_and_column_sums, x, y, kernels=2)


def test_column_sums_of_a_rows_result_stay_a_kernel_of_their_own(device):
    # The column sums read the row kernel's result: computed in it, they would read it before it exists.
    def centred_columns(x):
        return (x - x.sum(1, keepdim=True)).sum(0)

    x = torch.randn(37, 129, device=device)
    report = fused_matches_eager(centred_columns, x)
    assert "row_groups" not in kinds(report)


def test_rows_longer_than_a_block_keep_their_column_sums_apart(device):
    x, y = (torch.randn(3, 8193, device=device) for _ in range(2))
    # float32 sums of 8,193 products in another order than eager's: a few ulps of a sum of about 100
    report = fused_matches_eager(row_and_column_sums, x, y, rtol=1e-5, atol=1e-4)
    assert "row_groups" not in kinds(report)


def _epilogue(x, y, w):
    return (x * y).sum(1), x.sum(0) * w + 1.0


def _keepdim(x, y, w):
    return (x * y).sum(1, keepdim=True), x.sum(0, keepdim=True)


def _integers(x, y, w):
    return (x * y).sum(1), x.sum(0), (x > 0).sum(0)


def _three_dims(x, y, w):
    return (x * y).sum(2), (x * y).sum((0, 1))


def _column_major(x, y, w):
    return (x * y).sum(1), x.sum(0)  # rows are x's columns here: its outer dim is innermost in memory


SHAPES = {
    _epilogue: (37, 129),
    _keepdim: (37, 129),
    _integers: (37, 129),
    _three_dims: (3, 13, 129),
    _column_major: (129, 37),
}


@pytest.mark.parametrize("program", list(SHAPES), ids=lambda p: p.__name__.strip("_"))
def test_column_sums_with_an_epilogue_kept_dims_integers_three_dims_or_either_layout(program, device):
    shape = SHAPES[program]
    if program is _integers:
        x, y = (torch.randint(-5, 5, shape, device=device) for _ in range(2))
    else:
        x, y = (torch.randn(shape, device=device) for _ in range(2))
    if program is _column_major:
        x, y = x.t(), y.t()
    w = torch.randn(x.shape[-1], device=device)
    report = fused_matches_eager(program, x, y, w, rtol=1e-5, atol=1e-5)
    assert kinds(report) == ["row_groups"]
