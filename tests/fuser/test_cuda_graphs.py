"""`fuser.cuda_graphs`: which compiled graphs are replayed as CUDA graphs, and when.

The rules are checked here on any machine (fake CUDA tensors; a stand-in for torch.cuda.CUDAGraph that
records captures and replays). The real capture and replay run in tests/fuser/test_optimizers.py under
FUSER_TEST_DEVICE=cuda."""

from __future__ import annotations

import contextlib
from typing import ClassVar

import pytest
import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode

import fuser
from fuser import cuda_graphs

aten = torch.ops.aten


def graph_of(build, *devices: str) -> fx.Graph:
    """A graph over one (4,) float tensor per device, made by `build(graph, placeholders)`."""
    graph = fx.Graph()
    with FakeTensorMode():
        values = [torch.empty(4, device=device) for device in devices]
    inputs = []
    for number, value in enumerate(values):
        node = graph.placeholder(f"arg{number}")
        node.meta["val"] = value
        inputs.append(node)
    graph.output(build(graph, inputs))
    return graph


def in_place(graph, inputs):
    doubled = graph.call_function(aten.mul.Scalar, (inputs[0], 2.0))
    graph.call_function(aten.copy_.default, (inputs[0], doubled))
    return ()


def test_a_graph_that_only_writes_its_cuda_inputs_qualifies():
    assert cuda_graphs.unqualified_reason(graph_of(in_place, "cuda", "cuda")) is None
    returns_input = graph_of(lambda g, xs: (xs[1],), "cuda", "cuda")
    assert cuda_graphs.unqualified_reason(returns_input) is None
    assert cuda_graphs.output_positions(returns_input) == [1]


def test_a_cpu_input_a_fresh_output_or_a_random_op_disqualifies():
    assert "arg1 is not a CUDA tensor" in cuda_graphs.unqualified_reason(graph_of(in_place, "cuda", "cpu"))
    fresh = graph_of(lambda g, xs: (g.call_function(aten.mul.Scalar, (xs[0], 2.0)),), "cuda")
    assert "is not one of the inputs" in cuda_graphs.unqualified_reason(fresh)

    def noise_into_input(graph, inputs):
        noise = graph.call_function(aten.rand_like.default, (inputs[0],))
        graph.call_function(aten.copy_.default, (inputs[0], noise))
        return ()

    random = graph_of(noise_into_input, "cuda")
    assert "is random" in cuda_graphs.unqualified_reason(random)


class StandInGraph:
    """Records what torch.cuda.CUDAGraph would be asked to do."""

    made: ClassVar[list] = []

    def __init__(self):
        self.replays = 0
        StandInGraph.made.append(self)

    def replay(self):
        self.replays += 1


@pytest.fixture
def stand_in(monkeypatch):
    StandInGraph.made = []
    monkeypatch.setattr(torch.cuda, "CUDAGraph", StandInGraph)
    monkeypatch.setattr(torch.cuda, "graph", lambda graph: contextlib.nullcontext())
    fuser.reset_counters()
    return StandInGraph.made


def replayed(fail=False):
    runs = []

    def run(args):
        if fail:
            raise RuntimeError("an op synchronized")
        runs.append(list(args))
        args.clear()
        fuser.metrics.bump("kernels_launched", 2)
        return [runs[-1][0]]

    return cuda_graphs.ReplayedGraph(run, lambda: [], [0], "test graph"), runs


def test_captured_when_addresses_repeat_then_replayed_while_they_hold(stand_in):
    call, runs = replayed()
    a, b = torch.zeros(3), torch.zeros(5)
    assert call([a, b])[0] is a and len(runs) == 1 and not stand_in  # first call: run as usual
    fuser.reset_counters()
    assert call([a, b])[0] is a and len(stand_in) == 1 and stand_in[0].replays == 1  # captured, replayed
    assert len(runs) == 2  # the capture ran the graph's launches once (under the stream capture)
    # The capturing call counts its launches once, as any call does (the perf gate counts them per call).
    assert fuser.counters()["kernels_launched"] == 2
    outputs = call([a, b])
    assert outputs[0] is a and stand_in[0].replays == 2 and len(runs) == 2
    counts = fuser.counters()
    assert counts["graph_replays"] == 2 and counts["kernels_launched"] == 2 * 2
    moved = torch.zeros(5)
    call([a, moved])  # an input moved: run as usual, never the stale graph
    assert stand_in[0].replays == 2 and len(runs) == 3


def test_at_most_three_captures_and_none_after_a_failure(stand_in):
    call, _ = replayed()
    tensors = [torch.zeros(2) for _ in range(10)]
    for t in tensors:  # addresses that change every second call: a capture each time they repeat
        call([t])
        call([t])
    assert len(stand_in) == cuda_graphs.MAX_CAPTURES
    failing, _ = replayed(fail=True)
    t = torch.zeros(2)
    with pytest.raises(RuntimeError):
        failing([t])
    with pytest.raises(RuntimeError):  # the capture failed: logged, disabled, then run as usual (raises)
        failing([t])
    assert failing.disabled and failing.captures == 1


def test_by_default_horizontal_fusion_is_on_and_cuda_graphs_come_with_it_on_cuda_only(monkeypatch):
    monkeypatch.delenv("FUSER_HORIZONTAL", raising=False)
    monkeypatch.delenv("FUSER_CUDA_GRAPHS", raising=False)
    with FakeTensorMode():
        on_gpu, on_cpu = [torch.empty(2, device="cuda")], [torch.empty(2)]
    default = fuser.options.Options.from_dict({})
    assert default.horizontal and default.cuda_graphs_for(on_gpu) and not default.cuda_graphs_for(on_cpu)
    assert not fuser.options.Options.from_dict({"horizontal": False}).cuda_graphs_for(on_gpu)
    monkeypatch.setenv("FUSER_HORIZONTAL", "0")
    assert not fuser.options.Options.from_dict({}).horizontal
    horizontal = fuser.options.Options.from_dict({"horizontal": True})
    assert horizontal.cuda_graphs_for(on_gpu) and not horizontal.cuda_graphs_for(on_cpu)
    assert not fuser.options.Options.from_dict({"horizontal": True, "cuda_graphs": False}).cuda_graphs_for(
        on_gpu
    )
    monkeypatch.setenv("FUSER_CUDA_GRAPHS", "1")
    assert fuser.options.Options.from_dict({}).cuda_graphs_for(on_gpu)
