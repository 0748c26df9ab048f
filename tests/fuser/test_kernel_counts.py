"""How many kernels a program becomes: the fusion decisions themselves."""

from __future__ import annotations

import torch

import fuser


def ten_op_chain(x: torch.Tensor) -> torch.Tensor:
    x = torch.sin(x)
    x = x * 1.5
    x = x + 0.25
    x = torch.exp(x)
    x = torch.sigmoid(x)
    x = torch.tanh(x)
    x = x - 0.5
    x = torch.relu(x)
    x = x * x
    return torch.sqrt(x)


def chain_cut_by_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x = torch.cos(torch.sin(x) * 2.0 + 1.0)
    y = x @ w
    return torch.relu(torch.tanh(y) - 0.5) * 3.0


def test_a_ten_op_pointwise_chain_is_one_kernel(device):
    x = torch.randn(129, 65, device=device)
    report = fuser.explain(ten_op_chain, x)
    assert report.num_kernels == 1
    assert report.eager_calls == []
    torch.testing.assert_close(report.result, ten_op_chain(x))


def test_the_chain_cut_by_a_matmul_is_two_kernels_and_one_extern_call(device):
    x, w = torch.randn(33, 17, device=device), torch.randn(17, 9, device=device)
    report = fuser.explain(chain_cut_by_matmul, x, w)
    assert report.num_kernels == 2
    assert report.eager_calls == ["aten.mm.default"]
    torch.testing.assert_close(report.result, chain_cut_by_matmul(x, w))


def test_counters_count_launches_compiles_and_extern_calls(device):
    x, w = torch.randn(33, 17, device=device), torch.randn(17, 9, device=device)
    compiled = fuser.compile(chain_cut_by_matmul, strict=True)
    compiled(x, w)
    compiled(x, w)
    counts = fuser.counters()
    assert counts["kernels_launched"] == 4
    assert counts["kernels_compiled"] == 2
    assert counts["extern_calls"] == 2
    assert counts["graphs_compiled"] == 1
    fuser.reset_counters()
    assert set(fuser.counters().values()) == {0}


def test_kernels_are_reused_across_sizes_of_the_same_structure(device):
    # dynamic=False: each size is its own graph; the kernels' source is the same.
    compiled = fuser.compile(ten_op_chain, dynamic=False, strict=True)
    for rows, cols in [(7, 5), (33, 9), (129, 65)]:
        x = torch.randn(rows, cols, device=device)
        torch.testing.assert_close(compiled(x), ten_op_chain(x))
    counts = fuser.counters()
    assert counts["graphs_compiled"] == 3  # static shapes: Dynamo traces each size
    assert counts["kernels_compiled"] == 1  # but the kernel source does not depend on sizes


def test_broadcast_and_views_fuse_into_the_consumer_kernel(device):
    def program(a, b, c):
        return (a.t() * 2.0).reshape(-1)[::3] + b[:11].unsqueeze(0).expand(1, -1).squeeze(0) * c

    a, b, c = (
        torch.randn(11, 3, device=device),
        torch.randn(20, device=device),
        torch.randn((), device=device),
    )
    report = fuser.explain(program, a, b, c)
    assert report.num_kernels == 1
    torch.testing.assert_close(report.result, program(a, b, c))


def test_two_outputs_of_one_shape_share_a_kernel(device):
    def program(x, y):
        s = torch.sin(x) + y
        return s, torch.cos(s) * y

    x, y = torch.randn(40, 3, device=device), torch.randn(3, device=device)
    report = fuser.explain(program, x, y)
    assert report.num_kernels == 1
    for got, want in zip(report.result, program(x, y), strict=True):
        torch.testing.assert_close(got, want)


def test_a_view_of_an_input_feeding_a_matmul_stays_an_alias_not_a_copy_kernel(device):
    def program(x, w):
        return x.view(6, 4).t() @ w

    x, w = torch.randn(24, device=device), torch.randn(6, 5, device=device)
    report = fuser.explain(program, x, w)
    assert report.num_kernels == 0
    torch.testing.assert_close(report.result, program(x, w))


def test_with_dynamic_shapes_twenty_sizes_compile_one_graph_and_one_kernel(device):
    def program(x, y):
        return torch.relu(torch.sin(x) * y + 1.0)[:, 1::2]

    compiled = fuser.compile(program, dynamic=True, strict=True)
    for rows, cols in [(2 + 7 * i, 4 + 5 * i) for i in range(20)]:
        x, y = torch.randn(rows, cols, device=device), torch.randn(cols, device=device)
        torch.testing.assert_close(compiled(x, y), program(x, y))
    counts = fuser.counters()
    assert counts["graphs_compiled"] == 1
    assert counts["kernels_compiled"] == 1
    assert counts["kernels_launched"] == 20
    assert counts["fallbacks"] == 0


def test_a_size_change_under_default_automatic_dynamic_shapes_still_fuses(device):
    compiled = torch.compile(ten_op_chain, backend="fuser")
    for rows in (5, 9, 17):
        x = torch.randn(rows, 6, device=device)
        torch.testing.assert_close(compiled(x), ten_op_chain(x))
    assert fuser.counters()["kernels_launched"] == 3
    assert fuser.counters()["extern_calls"] == 0


def test_fuse_false_gives_every_op_its_own_kernel(device):
    x = torch.randn(17, 5, device=device)
    report = fuser.explain(ten_op_chain, x, fuser_options={"fuse": False})
    assert report.num_kernels == 10
    assert fuser.counters()["kernels_launched"] == 10
    torch.testing.assert_close(report.result, ten_op_chain(x))
