"""`fuser.runtime.cuda_graphs`: which compiled graphs are replayed as CUDA graphs, and when.

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
from fuser.runtime import cuda_graphs

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
    # The input it writes is never copied into a buffer of the capture (the write would miss it).
    assert cuda_graphs.written_inputs(graph_of(in_place, "cuda", "cuda")) == {0}
    assert cuda_graphs.written_inputs(returns_input) == set()


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


@pytest.mark.parametrize("value_dtype", [torch.float32, torch.float16])
def test_a_value_a_step_checks_on_the_host_disqualifies(value_dtype):
    # masked_fill's 0-d value is read before each launch (eager raises where it does not fit the result,
    # `LaunchStep.host_checks`): a replay would skip that read. A float16 value always fits float16.
    graph = fx.Graph()
    with FakeTensorMode():
        fakes = [
            torch.empty(4, device="cuda", dtype=torch.float16),
            torch.empty(4, device="cuda", dtype=torch.bool),
            torch.empty((), device="cuda", dtype=value_dtype),
        ]
        filled = fakes[0].masked_fill(fakes[1], fakes[2])
    x, mask, value = (graph.placeholder(name) for name in ("x", "mask", "value"))
    for node, fake in zip((x, mask, value), fakes, strict=True):
        node.meta["val"] = fake
    fill = graph.call_function(aten.masked_fill.Tensor, (x, mask, value))
    fill.meta["val"] = filled
    graph.call_function(aten.copy_.default, (x, fill))
    graph.output(())
    reason = cuda_graphs.unqualified_reason(graph)
    if value_dtype == torch.float16:
        assert reason is None
    else:
        assert "reads a 0-d value eager checks on the host" in reason


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


def graph_over(outputs, strides=False, fail=False):
    """A ReplayedGraph over a stand-in run that launches two kernels and returns `outputs(inputs)`; the
    inputs of each run are recorded."""
    runs = []

    def run(args):
        if fail:
            raise RuntimeError("an op synchronized")
        runs.append(list(args))
        args.clear()
        fuser.metrics.bump("kernels_launched", 2)
        return outputs(runs[-1])

    return cuda_graphs.ReplayedGraph(run, lambda: [], "test graph", strides=strides), runs


def replayed(fail=False):
    """A graph that returns its first input (it writes into its inputs, as an optimizer step does)."""
    return graph_over(lambda xs: [xs[0]], fail=fail)


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
    call([a, moved])  # an input moved: never the stale graph; a capture that copies that input in
    assert stand_in[0].replays == 2 and len(stand_in) == 2 and len(runs) == 2 + 2  # a warm run, the capture
    assert list(call.captures[1].copied) == [1]
    again = torch.ones(5)
    assert call([a, again])[0] is a and stand_in[1].replays == 1 and len(runs) == 4
    assert torch.equal(call.captures[1].copied[1], again)  # what the replay read


def test_inputs_that_move_every_call_are_copied_in_and_no_capture_follows_a_failure(stand_in):
    call, runs = replayed()
    tensors = [torch.full((2,), float(i)) for i in range(6)]
    for t in tensors:
        assert call([t])[0] is t  # the caller's tensor back, never the capture's buffer
    # The first call runs; the second makes a warm run over the buffer and the capture; four replays.
    assert len(stand_in) == 1 and stand_in[0].replays == 4 and len(runs) == 3
    assert torch.equal(call.captures[0].copied[0], tensors[-1])
    failing, _ = replayed(fail=True)
    t = torch.zeros(2)
    with pytest.raises(RuntimeError):
        failing([t])
    with pytest.raises(RuntimeError):  # the capture failed: logged, disabled, then run as usual (raises)
        failing([t])
    assert failing.disabled and not failing.captures and len(stand_in) == 2


def test_a_moved_input_that_is_expanded_is_copied_into_a_dense_buffer(stand_in):
    call, _ = replayed()
    row = torch.arange(3.0)
    first, second = row.expand(4, 3), (row + 1).expand(4, 3)  # stride 0: overlapping memory
    call([first])
    call([second])  # moved: copied in (into expanded memory, the copy would raise)
    (buffer,) = call.captures[0].copied.values()
    assert buffer.is_contiguous() and torch.equal(buffer, second)


def test_an_input_the_graph_writes_is_never_copied(stand_in):
    call, runs = replayed()
    call.written = frozenset({0})
    for _ in range(3):
        call([torch.zeros(2)])  # it moves every call: a copy would take the write
    assert not stand_in and len(runs) == 3


def test_by_default_horizontal_fusion_is_on_and_cuda_graphs_come_with_it_on_cuda_only(monkeypatch):
    monkeypatch.delenv("FUSER_HORIZONTAL", raising=False)
    monkeypatch.delenv("FUSER_CUDA_GRAPHS", raising=False)
    with FakeTensorMode():
        on_gpu, on_cpu = [torch.empty(2, device="cuda")], [torch.empty(2)]
    default = fuser.options.Options.from_dict({})
    # By default only graphs that write into their inputs (an optimizer step) are replayed.
    assert default.horizontal and default.cuda_graph_mode(on_gpu) == "inputs"
    assert default.cuda_graph_mode(on_cpu) is None
    assert fuser.options.Options.from_dict({"horizontal": False}).cuda_graph_mode(on_gpu) is None
    monkeypatch.setenv("FUSER_HORIZONTAL", "0")
    assert not fuser.options.Options.from_dict({}).horizontal
    horizontal = fuser.options.Options.from_dict({"horizontal": True})
    assert horizontal.cuda_graph_mode(on_gpu) == "inputs" and horizontal.cuda_graph_mode(on_cpu) is None
    assert (
        fuser.options.Options.from_dict({"horizontal": True, "cuda_graphs": False}).cuda_graph_mode(on_gpu)
        is None
    )
    monkeypatch.setenv("FUSER_CUDA_GRAPHS", "1")  # any graph of static shape
    assert fuser.options.Options.from_dict({}).cuda_graph_mode(on_gpu) == "any"


def test_in_mode_any_a_fresh_output_qualifies_but_symbolic_sizes_do_not():
    fresh = graph_of(lambda g, xs: (g.call_function(aten.mul.Scalar, (xs[0], 2.0)),), "cuda")
    assert cuda_graphs.unqualified_reason(fresh, "any") is None
    assert "is not one of the inputs" in cuda_graphs.unqualified_reason(fresh, "inputs")
    shapes = torch.fx.experimental.symbolic_shapes.ShapeEnv()
    with FakeTensorMode(shape_env=shapes):
        value = torch.empty(shapes.create_unbacked_symint(), 3, device="cuda")
    fresh.find_nodes(op="placeholder")[0].meta["val"] = value
    assert "has symbolic sizes" in cuda_graphs.unqualified_reason(fresh, "any")


def doubling(strides=False):
    """A graph whose output is new: what a capture owns."""
    return graph_over(lambda xs: [xs[0] * 2, None], strides=strides)


def test_a_capture_is_replayed_only_once_the_caller_holds_nothing_it_returned(stand_in):
    call, runs = doubling()
    x = torch.ones(3)
    first = call([x])  # run as usual
    second = call([x])  # captured (A) and replayed: its output is A's memory
    assert len(stand_in) == 1 and stand_in[0].replays == 1 and len(runs) == 2 and second[1] is None
    third = call([x])  # the caller still holds A's output: a second capture (B), not a replay of A
    assert len(stand_in) == 2 and stand_in[1].replays == 1
    assert third[0].data_ptr() != second[0].data_ptr() != first[0].data_ptr()
    view = second[0][1:]  # a view of A's output keeps A held too
    del second
    call([x])
    assert len(stand_in) == 3 and [g.replays for g in stand_in] == [1, 1, 1]  # A held by the view: C
    del view
    fourth = call([x])  # A is free: replayed, its output at the same place as before
    assert [g.replays for g in stand_in] == [2, 1, 1] and len(runs) == 4
    del third, fourth
    kept = [call([x]) for _ in range(4)]  # every capture held: at most three, then run as usual
    assert len(stand_in) == cuda_graphs.MAX_CAPTURES and len(runs) == 4 + 1
    assert [g.replays for g in stand_in] == [3, 2, 2]
    assert len({out[0].data_ptr() for out in kept}) == 4  # four live results, four places


def test_a_backward_graph_replays_only_at_the_strides_it_was_captured_with(stand_in):
    call, _ = doubling(strides=True)
    base = torch.ones(4, 4)
    call([base])
    call([base])
    assert len(stand_in) == 1 and stand_in[0].replays == 1
    call([base.t()])  # the same address, transposed: not the stale capture, a new one that copies it in
    assert stand_in[0].replays == 1 and call.captures[1].copied[0].stride() == (1, 4)


def test_an_output_viewing_an_input_is_never_replayed(stand_in):
    call, _ = graph_over(lambda xs: [xs[0][1:]])
    x = torch.arange(4.0)
    for _ in range(3):
        out = call([x])
        assert out[0].data_ptr() == x[1:].data_ptr()  # the caller's memory, as eager returns it
    assert call.disabled and not call.captures and len(stand_in) == 1


# --- the real thing: compiled graphs replayed on a GPU (FUSER_TEST_DEVICE=cuda), run as usual on the CPU ---


def chain(x, y):
    return torch.tanh(torch.sigmoid(x * y + 1.0) * x) - y


def test_any_graph_replayed_stays_right_as_inputs_change_values_and_places_and_results_are_kept(device):
    fuser.reset_counters()
    compiled = torch.compile(chain, backend="fuser", options={"cuda_graphs": True})
    x, y = torch.randn(1000, device=device), torch.randn(1000, device=device)
    for step in range(10):
        if step == 5:
            x = torch.randn(1000, device=device)  # a new place: run as usual, then captured there too
        if step in (3, 7):
            x.add_(1.0)  # mutated in place between calls
        y.copy_(torch.randn(1000))  # new values at the same place
        out = compiled(x, y)  # the last result is kept while the next is computed
        torch.testing.assert_close(out, chain(x, y))
    replays = fuser.counters()["graph_replays"]
    assert (replays >= 5) if device == "cuda" else replays == 0, fuser.counters()
    kept = []
    for _ in range(6):  # every result kept: no replay may overwrite one
        y.copy_(torch.randn(1000))
        kept.append((compiled(x, y), chain(x, y)))
    for got, want in kept:
        torch.testing.assert_close(got, want)


def test_a_training_step_replayed_forward_and_backward_matches_eager(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU()).to(device)
    reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU()).to(
        device
    )
    reference.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="fuser", options={"cuda_graphs": True})
    fuser.reset_counters()
    for _ in range(6):
        x = torch.randn(8, 16, device=device)
        for net in (compiled, reference):
            net.zero_grad(set_to_none=True)
            loss = (net(x) ** 2).mean()
            loss.backward()
        for got, want in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(got.grad, want.grad)
    replays = fuser.counters()["graph_replays"]
    # Forward and backward each replay from their third call on.
    assert (replays >= 2 * 3) if device == "cuda" else replays == 0, fuser.counters()
