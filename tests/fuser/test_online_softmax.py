"""A looped row kernel computes a row's max and its sum of exp(x - max) in one pass over the row (online
softmax, `RowBuilder.online_softmax`), not one pass each: a cross-entropy over 32,000 classes read its
logits twice for them (issue 29). Rows long enough to loop on the CPU (over 2**14 columns)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from shared_checks import fused_matches_eager

from fuser.emit import ir

COLS = 20_000


def passes(source: str) -> int:
    """How many passes over a row the kernel makes (a peeled pass's loop over its last chunk not counted)."""
    return source.count("for col_start in range") - source.count("for col_start in range(whole_cols")


def edge_rows(dtype=torch.float32, device="cpu") -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(6, COLS, generator=generator, dtype=torch.float64) * 30
    x[1] = float("-inf")  # every element -inf: eager's exp(-inf - -inf) is nan
    x[2, 11] = float("nan")
    x[3, 9] = float("inf")
    x[4, :100] = float("-inf")  # a max that grows from -inf partway along the row
    x[5] = torch.linspace(-80, 80, COLS)  # the max at the row's end: every lane rescales as it grows
    return x.to(dtype).to(device)


def test_softmax_over_a_long_row_is_one_pass_for_its_statistics(device):
    x = edge_rows(device=device)
    report = fused_matches_eager(lambda x: torch.softmax(x, 1), x, kernels=1)
    (kernel,) = report.kernels
    assert kernel.kind == "looped" and passes(kernel.source) == 2  # statistics, then the stored result


def test_log_softmax_of_a_long_row_matches_eager_at_the_extremes(device):
    x = edge_rows(device=device)
    report = fused_matches_eager(lambda x: torch.log_softmax(x, 1), x, kernels=1)
    assert passes(report.kernels[0].source) == 2


def test_a_cross_entropy_over_many_classes_reads_its_logits_once(device):
    logits = (
        (torch.randn(5, COLS, generator=torch.Generator().manual_seed(1)) * 8).to(torch.bfloat16).to(device)
    )
    targets = torch.tensor([0, COLS - 1, 17, 3, 4], device=device)

    def loss(logits, targets):
        return F.cross_entropy(logits.float(), targets, reduction="none")

    report = fused_matches_eager(loss, logits, targets, kernels=1)
    (kernel,) = report.kernels
    assert passes(kernel.source) == 1


def test_a_bfloat16_softmax_is_one_pass_too_as_its_decomposition_computes_in_float32(device):
    x = edge_rows(torch.bfloat16, device)
    report = fused_matches_eager(lambda x: torch.softmax(x, 1), x, kernels=1)
    assert passes(report.kernels[0].source) == 2


def test_a_float64_softmax_keeps_two_passes_for_its_statistics(device):
    # The running sums are float32: a float64 row's would lose its precision.
    x = edge_rows(torch.float64, device)
    report = fused_matches_eager(lambda x: torch.softmax(x, 1), x, kernels=1)
    assert passes(report.kernels[0].source) == 3


def test_the_sum_of_exp_alone_is_nan_where_eager_s_is(device):
    # A row of -inf: eager's exp(-inf - -inf) is nan, so its sum is; the lanes' running sums are all 0.
    x = edge_rows(device=device)

    def sum_of_exp(x):
        return (x - x.amax(1, keepdim=True)).exp().sum(1)

    report = fused_matches_eager(sum_of_exp, x, kernels=1)
    assert report.result[1].isnan() and passes(report.kernels[0].source) == 1


def relative_ulps(value: torch.Tensor, exact: torch.Tensor) -> float:
    """The largest relative distance of `value` from `exact`, in float32 ulps of 1."""
    return ((value.double() - exact).abs() / exact.abs()).max().item() / 2**-24


def test_the_sum_of_exp_is_as_close_to_float64_as_eager_s(device):
    # On a GPU the terms take the fast exp (ex2.approx): a term's error of a few ulps must stay below what
    # the float32 sum itself rounds, so the sum is no further from float64 than about eager's.
    def sum_of_exp(x):
        return (x - x.amax(1, keepdim=True)).exp().sum(1)

    for scale in (1.0, 8.0, 30.0):
        x = torch.randn(8, COLS, generator=torch.Generator().manual_seed(2)) * scale
        exact = sum_of_exp(x.double())
        report = fused_matches_eager(sum_of_exp, x.to(device), kernels=1)
        eager = sum_of_exp(x.to(device))
        fused_ulps, eager_ulps = relative_ulps(report.result.cpu(), exact), relative_ulps(eager.cpu(), exact)
        assert fused_ulps <= 2 * eager_ulps + 2, (scale, fused_ulps, eager_ulps)


def test_rows_of_whole_chunks_and_extremes_in_the_last_chunk(device):
    # The whole chunks are read without a column mask (`columns(peeled=True)`) and the partial last chunk
    # with it: on the CPU (chunks of 4,096) 5 × 4,096 columns leave no partial chunk, one more a chunk of 1.
    for cols in (5 * 4096, 4 * 4096 + 1):
        x = torch.randn(6, cols, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 30
        x[0] = float("-inf")
        x[1, -1] = float("nan")
        x[2, -2] = float("inf")
        x[3, -100:] = float("-inf")
        x[4, -1] = 500.0  # the max in the last chunk
        x[5, : 2 * 4096] = float("-inf")  # whole chunks of -inf before the first finite one
        report = fused_matches_eager(lambda x: torch.log_softmax(x, 1), x.float().to(device), kernels=1)
        assert report.kernels[0].kind == "looped" and passes(report.kernels[0].source) == 2


def test_a_cross_entropy_s_mean_gathers_each_row_s_target_in_the_row_kernel(device):
    # Each row's pick, `gather(x - max - log(sum), 1, target)`, is made by the kernel that reduces the row:
    # in the mean's kernel (one program over every row) each pick was a scattered load of the logits from
    # that one program, 10.5 us of the forward on the H200 (fuser.plan.partition._settle_gathers).
    logits = (
        (torch.randn(7, COLS, generator=torch.Generator().manual_seed(2)) * 8).to(torch.bfloat16).to(device)
    )
    targets = torch.tensor([0, COLS - 1, 17, 3, 3, 4, 9], device=device)

    def loss(logits, targets):
        return F.cross_entropy(logits.float(), targets, ignore_index=3, label_smoothing=0.1)

    report = fused_matches_eager(loss, logits, targets, kernels=2)
    rows, mean = report.kernels
    assert rows.kind == "looped"
    assert any("aten.gather" in line for line in rows.covers)
    assert not any("aten.gather" in line for line in mean.covers)
    loads = [access for access in mean.accesses if isinstance(access, ir.Load)]
    assert loads and torch.bfloat16 not in {load.dtype for load in loads}  # no logits read
