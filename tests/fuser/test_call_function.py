"""A compiled graph's call written out as one function (`fuser.runtime.call_function`): from the second call
on it computes what the general loop computes, and wherever what it assumed does not hold (the sizes, an
input's alignment or layout, a launch that raises) the loop takes over."""

from __future__ import annotations

import logging

import pytest
import torch

import fuser
from fuser.runtime.graph import CompiledGraph


@pytest.fixture
def compiled_graphs(monkeypatch) -> list[CompiledGraph]:
    """The compiled graphs (forward and backward) the fuser makes during the test, in order."""
    made: list[CompiledGraph] = []
    original = CompiledGraph.__init__

    def keep(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(CompiledGraph, "__init__", keep)
    return made


def _chain(x, y):
    return ((x * y).sin() + 1.5).relu() * y - x.exp()


def _softmax_and_sum(x, y):
    return torch.softmax(x, dim=-1) * y, (x * y).sum(dim=0)


def _eager_between_kernels(x, y):
    return (torch.mm(x.sin(), y.t()) + 1.0).tanh()


def _in_place(x, y):
    x.mul_(2.0).add_(y)
    return x


def _layer_norm(x, y):
    return torch.nn.functional.layer_norm(x * y, x.shape[-1:]), x.mean(dim=-1)


PROGRAMS = [_chain, _softmax_and_sum, _eager_between_kernels, _in_place, _layer_norm]


def _launched(call) -> int:
    fuser.reset_counters()
    call()
    return fuser.counters()["kernels_launched"]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_later_calls_run_the_written_function_and_match_eager(program, device, compiled_graphs):
    compiled = torch.compile(program, backend="fuser")
    shape = (37, 130)
    first_inputs = [torch.randn(shape, device=device) for _ in range(2)]
    first = _launched(lambda: compiled(*[t.clone() for t in first_inputs]))
    (graph,) = compiled_graphs
    assert graph.call is not None, "nothing was written out"
    for _ in range(3):  # new values at new addresses each call
        inputs = [torch.randn(shape, device=device) for _ in range(2)]
        got = compiled(*[t.clone() for t in inputs])
        torch.testing.assert_close(got, program(*[t.clone() for t in inputs]))
    assert _launched(lambda: compiled(*first_inputs)) == first > 0


def test_another_binding_of_the_sizes_runs_through_the_loop(device, compiled_graphs):
    compiled = torch.compile(_softmax_and_sum, backend="fuser", dynamic=True)
    for rows in (9, 9, 23, 9, 40):
        x, y = torch.randn(rows, 50, device=device), torch.randn(rows, 50, device=device)
        torch.testing.assert_close(compiled(x, y), _softmax_and_sum(x, y))
    (graph,) = compiled_graphs
    assert graph.binder.symbols and graph.call is not None


def test_an_input_at_an_unaligned_address_is_launched_as_its_own_specialization(device, compiled_graphs):
    compiled = torch.compile(_chain, backend="fuser")
    base = torch.randn(2, 1025, device=device)
    for offset in (0, 0, 1, 0):  # a float32 one element in is 4 bytes past a 16-byte boundary
        x, y = base[0, offset : offset + 1024], base[1, offset : offset + 1024]
        torch.testing.assert_close(compiled(x, y), _chain(x, y))
    assert compiled_graphs[0].call is not None


def test_a_strided_input_where_the_kernel_reads_the_flat_offset_is_refused_as_by_the_loop(
    device, compiled_graphs
):
    compiled = torch.compile(_chain, backend="fuser")
    x, y = torch.randn(64, 64, device=device), torch.randn(64, 64, device=device)
    compiled(x, y)
    (graph,) = compiled_graphs
    assert graph.call is not None
    # Dynamo's guards keep a strided tensor from this graph; a caller that bypasses them gets the loop's error.
    with pytest.raises(RuntimeError, match="generated for a contiguous input"):
        graph([x.t(), y])


def _break_launches(call, calls: list) -> None:
    """Make every launch the written function makes raise (through torch's C entry point or a stage's launcher)."""

    def refuse(*args):
        calls.append(args)
        raise RuntimeError("planted launch failure")

    for name, value in list(call.__globals__.items()):
        if name.startswith("launch_kernel"):
            call.__globals__[name] = refuse
        elif name.startswith("stage"):
            value.launcher = refuse


def test_a_launch_that_fails_runs_its_nodes_eagerly_and_the_loop_takes_over(device, compiled_graphs, caplog):
    compiled = torch.compile(_chain, backend="fuser", options={"strict": False})
    x, y = torch.randn(300, device=device), torch.randn(300, device=device)
    compiled(x, y)
    (graph,) = compiled_graphs
    failed: list = []
    _break_launches(graph.call, failed)
    fuser.reset_counters()
    with caplog.at_level(logging.WARNING, logger="fuser"):
        torch.testing.assert_close(compiled(x, y), _chain(x, y))
        torch.testing.assert_close(compiled(x, y), _chain(x, y))
    assert len(failed) == 1, "the failed kernel was launched again"
    assert graph.call is None and fuser.counters()["fallbacks"] == 1
    assert "planted launch failure" in caplog.text


def test_a_launch_that_fails_under_strict_raises(device, compiled_graphs):
    compiled = torch.compile(_chain, backend="fuser", options={"strict": True})
    x, y = torch.randn(300, device=device), torch.randn(300, device=device)
    compiled(x, y)
    _break_launches(compiled_graphs[0].call, [])
    with pytest.raises(RuntimeError, match="planted launch failure"):
        compiled(x, y)


def test_the_backward_graph_is_written_out_too(device, compiled_graphs):
    def loss(x, w):
        return (torch.tanh(x * w) * x).sum()

    compiled = torch.compile(loss, backend="fuser")
    for _ in range(3):
        x = torch.randn(33, 65, device=device)
        w = torch.randn(33, 65, device=device, requires_grad=True)
        compiled(x, w).backward()
        expected_w = w.detach().clone().requires_grad_()
        loss(x, expected_w).backward()
        torch.testing.assert_close(w.grad, expected_w.grad)
    assert len(compiled_graphs) == 2 and all(graph.call is not None for graph in compiled_graphs)


def test_the_option_off_keeps_every_call_in_the_loop(device, compiled_graphs):
    compiled = torch.compile(_chain, backend="fuser", options={"call_function": False})
    x, y = torch.randn(300, device=device), torch.randn(300, device=device)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, y), _chain(x, y))
    assert compiled_graphs[0].call is None


def test_a_split_reductions_workspaces_are_allocated_by_the_written_call(device, compiled_graphs):
    def sums(x):
        return (x * 2).sum(dim=0), x.sum(dim=1)

    compiled = torch.compile(sums, backend="fuser")
    for _ in range(3):
        x = torch.randn(4096, 64, device=device)
        torch.testing.assert_close(compiled(x), sums(x), rtol=1e-4, atol=1e-3)
    assert "partials" in compiled_graphs[0].call.source  # the workspaces, made by the written call
