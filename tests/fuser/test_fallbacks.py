"""What the fuser cannot lower runs eager, says why in one log line, and is never silently wrong."""

from __future__ import annotations

import copy
import logging
import subprocess
import sys

import pytest
import torch
from torch import fx

import fuser
import fuser.emit.generation
from fuser.plan.partition import lowering_obstacle
from fuser.runtime import kernel_cache, kernel_step


def test_an_unlowered_op_runs_eager_between_kernels_with_a_logged_reason(caplog, device):
    def program(x):
        return torch.cumsum(torch.sin(x) + 1.0, dim=0) * 2.0

    x = torch.randn(31, 7, device=device)
    with caplog.at_level(logging.INFO, logger="fuser"):
        report = fuser.explain(program, x)
    assert report.num_kernels == 2
    assert report.eager_calls == ["aten.cumsum.default"]
    assert ("aten.cumsum.default", "no lowering in the op table") in report.fallbacks
    assert "aten.cumsum.default runs eager: no lowering in the op table" in caplog.messages
    torch.testing.assert_close(report.result, program(x))


def test_index_add_runs_eager_whole_so_alpha_fuses_into_the_add_as_in_eager(device):
    # The stock decomposition multiplies by alpha first: 2 * 3.4e38 overflows, and -inf + inf is nan
    # where eager's fused multiply-add gives -inf.
    # (Rows of 8: eager's CPU kernel fuses the multiply on its vectorized path, not for 1-D tensors.)
    x = torch.full((2, 8), 3.0, device=device)
    source = torch.stack([torch.full((8,), value, device=device) for value in (-float("inf"), 3.4e38, 0.5)])
    index = torch.tensor([0, 0, 1], device=device)
    program = lambda a, i, s: torch.index_add(a, 0, i, s, alpha=2)  # noqa: E731
    report = fuser.explain(program, x, index, source)
    assert report.eager_calls == ["aten.index_add.default"] and report.num_kernels == 0
    torch.testing.assert_close(report.result, program(x, index, source), equal_nan=True)


def test_complex_tensors_run_eager_with_the_dtype_named(caplog, device):
    def program(z):
        return z * 2.0 + 1.0

    z = torch.randn(5, 3, dtype=torch.complex64, device=device)
    with caplog.at_level(logging.INFO, logger="fuser"):
        report = fuser.explain(program, z)
    assert report.num_kernels == 0
    assert any("dtype torch.complex64 is not lowered" in m for m in caplog.messages)
    torch.testing.assert_close(report.result, program(z))


def test_float8_inputs_run_eager_and_the_rest_still_fuses(device):
    def program(x):
        return torch.sin(x.to(torch.float32)) * 3.0

    x = torch.randn(9, 4, device=device).to(torch.float8_e4m3fn)
    report = fuser.explain(program, x)
    assert ("aten._to_copy.default", "dtype torch.float8_e4m3fn is not lowered") in report.fallbacks
    assert report.num_kernels == 1
    torch.testing.assert_close(report.result, program(x))


def _node_with_value(value: torch.Tensor) -> fx.Node:
    graph = fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = value
    node = graph.call_function(torch.ops.aten.mul.Tensor, (x, x))
    node.meta["val"] = value
    return node


def test_sparse_and_quantized_layouts_are_not_lowered():
    sparse = torch.zeros(3, 3).to_sparse()
    quantized = torch.quantize_per_tensor(torch.zeros(3), 0.1, 0, torch.quint8)
    assert lowering_obstacle(_node_with_value(sparse)) == "layout torch.sparse_coo is not lowered"
    assert lowering_obstacle(_node_with_value(quantized)) == "dtype torch.quint8 is not lowered"


def _broken_codegen(kernel):
    raise RuntimeError("planted codegen failure")


def test_a_codegen_failure_raises_when_strict(monkeypatch, device):
    monkeypatch.setattr(fuser.emit.generation, "generate", _broken_codegen)
    x = torch.randn(8, device=device)
    with pytest.raises(Exception, match="planted codegen failure"):
        fuser.compile(lambda t: torch.sin(t) + 1.0, strict=True)(x)


def test_a_codegen_failure_falls_back_to_eager_with_a_warning_when_not_strict(monkeypatch, caplog, device):
    monkeypatch.setattr(fuser.emit.generation, "generate", _broken_codegen)
    x = torch.randn(8, device=device)
    with caplog.at_level(logging.WARNING, logger="fuser"):
        out = fuser.compile(lambda t: torch.sin(t) + 1.0, strict=False)(x)
    torch.testing.assert_close(out, torch.sin(x) + 1.0)
    assert any("planted codegen failure" in m and "run eagerly" in m for m in caplog.messages)
    assert fuser.counters()["fallbacks"] == 1
    assert fuser.counters()["kernels_launched"] == 0


def test_a_kernel_that_fails_to_launch_runs_its_nodes_eagerly_when_not_strict(monkeypatch, caplog, device):
    def broken_load(source, interpreted):
        raise RuntimeError("planted launch failure")

    monkeypatch.setattr(kernel_cache, "load_kernel", broken_load)
    x = torch.randn(8, 3, device=device)
    compiled = fuser.compile(lambda t: torch.cos(t) * 2.0, strict=False)
    with caplog.at_level(logging.WARNING, logger="fuser"):
        first, second = compiled(x), compiled(x)
    torch.testing.assert_close(first, torch.cos(x) * 2.0)
    torch.testing.assert_close(second, torch.cos(x) * 2.0)
    assert sum("planted launch failure" in m for m in caplog.messages) == 1  # logged once, then eager
    assert fuser.counters()["extern_calls"] == 4


def test_the_log_option_prints_fallback_lines_on_stderr():
    script = (
        "import torch, fuser\n"
        "f = fuser.compile(lambda x: torch.cumsum(x, 0) + 1, log=True)\n"
        "f(torch.randn(4))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "fuser: aten.cumsum.default runs eager: no lowering in the op table" in result.stderr


def test_unknown_options_and_modes_are_rejected_by_name():
    with pytest.raises(TypeError, match="unknown option\\(s\\) strcit"):
        fuser.compile(lambda x: x, strcit=True)
    with pytest.raises(TypeError, match="option strict takes a bool"):
        fuser.compile(lambda x: x, strict="yes")
    compiled = torch.compile(lambda x: x + 1, backend="fuser", mode="max-autotune")
    with pytest.raises(Exception, match="mode 'max-autotune' is not supported"):
        compiled(torch.randn(3))


def _traced_and_compiled(program, *example, planted_sizes: dict[str, torch.Tensor] | None = None):
    """`program` traced with fake tensors on `example` (its nodes' recorded sizes replaced by the
    `planted_sizes` values, by node name), then compiled by the fuser with every lowering on."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from fuser.compiler import compile_graph
    from fuser.options import Options

    graph = make_fx(program, tracing_mode="fake", _allow_non_fake_inputs=True)(*example)
    for node in graph.graph.nodes:
        if node.name in (planted_sizes or {}):
            node.meta["val"] = planted_sizes[node.name]
    return compile_graph(graph, list(example), Options.from_dict({"unvalidated": "fuse"}))


@pytest.mark.parametrize("caught_by", ["the plan (an op tagged dynamic_output_shape)", "the launch"])
def test_a_kernel_fed_a_size_other_than_recorded_is_never_wrong(caught_by):
    # On CUDA, torch 2.11 traced index_fill's backward with `_unique` giving one element where it gave
    # three at run time; a kernel planned for that one row summed one row: a wrong value gradient. Here
    # the same lie is planted in the graph's metadata on the CPU. An op tagged dynamic_output_shape
    # keeps what it sizes out of kernels; where nothing says so (torch 2.11's CUDA trace), the launch
    # checks the sizes an eager step made against the plan's.
    aten = torch.ops.aten
    tagged = caught_by.startswith("the plan")

    def backward_of_index_fill(tangents, indices):
        filled = aten.index_fill.int_Scalar(tangents, 0, indices, 0)
        unique = aten._unique.default(indices, False)[0] if tagged else indices
        return filled, aten.index_select.default(tangents, 0, unique).sum()

    tangents, traced_with = torch.randn(37, 7), torch.tensor([3, 3, 3, 3] if tagged else [3])
    one_row = {"getitem": torch.empty(1, dtype=torch.int64), "index_select": torch.empty(1, 7)}
    compiled = _traced_and_compiled(backward_of_index_fill, tangents, traced_with, planted_sizes=one_row)
    indices = torch.tensor([3, 5, 3, 0])
    got, want = compiled([tangents, indices]), backward_of_index_fill(tangents, indices)
    torch.testing.assert_close(got[1], want[1])
    torch.testing.assert_close(got[0], want[0])


def test_a_horizontal_kernel_fed_sizes_other_than_planned_runs_eagerly():
    # The launch's check in a horizontal kernel too: two index_selects planned for one row each, fed
    # four at run time (the sizes eager steps make are not what the trace recorded).
    from fuser.runtime.horizontal_step import HorizontalStep

    aten = torch.ops.aten

    def program(a, b, indices):
        return aten.index_select.default(a, 0, indices) * 2, aten.index_select.default(b, 0, indices) * 2

    a, b = torch.randn(37, 7), torch.randn(37, 5)
    compiled = _traced_and_compiled(program, a, b, torch.tensor([3]))
    assert any(isinstance(step, HorizontalStep) for step in compiled.steps)
    indices = torch.tensor([3, 5, 3, 0])
    for got, want in zip(compiled([a, b, indices]), program(a, b, indices), strict=True):
        torch.testing.assert_close(got, want)


def test_a_kernel_after_one_that_fell_back_for_its_sizes_is_checked_too():
    # The first kernel (a row sum) reads an index_select planned for one row and falls back for four;
    # the second (a full sum of the first's result) reads that real size from a kernel's step, not an
    # eager one, and was planned for one element.
    aten = torch.ops.aten

    def program(a, indices):
        rows = aten.index_select.default(a, 0, indices).sum(1)
        return rows.exp().sum(), rows

    a = torch.randn(37, 7)
    compiled = _traced_and_compiled(program, a, torch.tensor([3]))
    assert sum(isinstance(step, kernel_step.KernelStep) for step in compiled.steps) == 2
    indices = torch.tensor([3, 5, 3, 0])
    for got, want in zip(compiled([a, indices]), program(a, indices), strict=True):
        torch.testing.assert_close(got, want)


def test_batch_norm_statistics_that_eager_returns_in_float32_reach_kernels_as_traced(device):
    # Found by the zoo tier. CPU batch norm on bfloat16 saves float32 statistics where its meta kernel says bfloat16: the
    # backward kernel, generated for bfloat16, read float32 bytes (a shape error in the interpreter,
    # garbage on a GPU). Extern results now arrive in the dtype the graph was traced with.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    model = model.to(device)
    x = torch.randn(2, 3, 6, 6, device=device)
    cotangent = torch.randn(2, 8, 6, 6, device=device)

    def gradients(net):
        with torch.autocast(device, torch.bfloat16):
            y = net(x)
        (y.float() * cotangent).sum().backward()
        return [p.grad for p in net.parameters()]

    expected = gradients(copy.deepcopy(model))
    compiled = gradients(torch.compile(copy.deepcopy(model), backend="fuser"))
    scale = max(e.abs().max().item() for e in expected)
    torch.testing.assert_close(
        compiled, expected, atol=0.05 * scale, rtol=0
    )  # bf16 statistics, rounded once more


def test_a_number_that_changes_between_calls_stays_eager_where_an_op_reads_it(device):
    """A label smoothing given as an argument changes between calls, so Dynamo's second graph takes it as a
    SymFloat input. An op reading it ran its kernel's generation into that number as if it were a tensor
    (AttributeError: 'SymFloat' object has no attribute 'shape'; strict mode raised, else the whole kernel
    ran eager). Now the op reading the number runs eager and the rest fuses."""

    def loss(logits, targets, smoothing):
        return torch.nn.functional.cross_entropy(logits, targets, label_smoothing=smoothing)

    compiled = torch.compile(loss, backend="fuser")
    generator = torch.Generator().manual_seed(0)
    with fuser.collecting() as graphs:
        # A size and the number both change: Dynamo's automatic dynamic then makes both symbolic.
        for smoothing, classes in ((0.0, 40), (0.1, 40), (0.0, 50), (0.1, 50), (0.2, 60)):
            logits = torch.randn(6, classes, generator=generator).to(device)
            targets = torch.randint(0, classes, (6,), generator=generator).to(device)
            torch.testing.assert_close(compiled(logits, targets, smoothing), loss(logits, targets, smoothing))
    eager = [call for graph in graphs for call in graph.eager_calls]
    assert eager and set(eager) == {"aten.mul.Scalar"}
    assert "it computes with a symbolic number, not a tensor" in {r for g in graphs for _, r in g.fallbacks}


def test_views_and_expands_of_symbolic_sizes_stay_in_their_kernel(device):
    """The rule above is for numbers an op computes with: a view's symbolic sizes are kernel parameters
    (its first version sent every view and expand of a dynamic graph eager)."""

    def program(x, y):
        return (x.sin().reshape(x.shape[0] * x.shape[1]) + y.expand(x.shape).reshape(-1)).exp()

    with fuser.collecting() as graphs:
        compiled = torch.compile(program, backend="fuser", dynamic=True)
        for rows in (4, 6):
            x, y = torch.randn(rows, 5, device=device), torch.randn(1, 5, device=device)
            torch.testing.assert_close(compiled(x, y), program(x, y))
    assert graphs and all(not g.fallbacks and not g.eager_calls for g in graphs)


# Calls eager's kernels refuse when they run, though tracing (the meta functions) accepts them: a kernel
# would return a value where eager raises (found by the conformance full tier's eager-rejects check).
EAGER_REJECTS = {
    "a bool Scalar subtracted": lambda x, i, b: x - True,
    "from a bool Scalar": lambda x, i, b: True - x,
    "a bool tensor subtracted": lambda x, i, b: x - b,
    "a bool alpha for floats": lambda x, i, b: torch.add(x, x, alpha=True),
    # the aten overload: torch.sub's decomposition refuses this while tracing already
    "a float alpha for integers": lambda x, i, b: torch.ops.aten.sub.Scalar(i, 1, alpha=1.5),
    # Scalars eager's kernels convert to the result dtype with an overflow check
    "a threshold out of int8's range": lambda x, i, b: torch.threshold(i.to(torch.int8), 1000, 0),
    "a threshold value out of int8's range": lambda x, i, b: torch.threshold(i.to(torch.int8), 0, -1000),
    "a fill out of uint8's range": lambda x, i, b: i.to(torch.uint8).masked_fill(b.flatten()[:30], 300),
    "a fill out of float16's range": lambda x, i, b: x.half().masked_fill(b, 1e10),
    "a full_like out of int16's range": lambda x, i, b: torch.full_like(i.to(torch.int16), 40000),
    "an addcmul value out of uint8's range": lambda x, i, b: torch.addcmul(
        *[i.to(torch.uint8)] * 3, value=300
    ),
    "a clamp bound out of int8's range": lambda x, i, b: torch.clamp(i.to(torch.int8), min=-1000),
    "integers to a negative power": lambda x, i, b: torch.pow(i, -2),
}
# What eager's kernel on a device accepts: CUDA's addcmul converts its value to the accumulate type (int64
# for uint8), so 300 fits there (seen on an H100, session 45).
EAGER_ACCEPTS_ON = {EAGER_REJECTS["an addcmul value out of uint8's range"]: {"cuda"}}


@pytest.mark.opt_in_unvalidated("the check is the partition's, whatever the manifest says")
@pytest.mark.parametrize("program", EAGER_REJECTS.values(), ids=EAGER_REJECTS.keys())
def test_calls_eager_rejects_when_it_runs_raise_compiled_too(program, device):
    args = (
        torch.randn(6, 5, device=device),
        torch.arange(30, device=device),
        torch.rand(6, 5, device=device) > 0.5,
    )
    if device in EAGER_ACCEPTS_ON.get(program, ()):
        # the check runs the call eagerly on every device, so it answers as this device's eager does
        torch.testing.assert_close(
            torch.compile(program, backend="fuser", dynamic=False)(*args), program(*args)
        )
        return
    with pytest.raises(Exception) as eager:
        program(*args)
    with pytest.raises(Exception) as compiled:
        torch.compile(program, backend="fuser", dynamic=False)(*args)
    first_line = str(eager.value).splitlines()[0]
    assert first_line in str(compiled.value)


def test_the_same_ops_on_values_eager_accepts_still_fuse(device):
    x, i = torch.randn(6, 5, device=device), torch.arange(30, device=device)
    u8, mask = i.to(torch.uint8), i % 3 == 0
    for program, args in [
        (lambda x: (x - 1) * torch.rsub(x, 2.0, alpha=3), (x,)),
        (lambda i: torch.sub(i, 1, alpha=2) + torch.add(i, i, alpha=3), (i,)),
        # in range as c10 converts: a negative integer wraps into uint8, inf is a float16
        (lambda u, m: u.masked_fill(m, -1) + torch.addcmul(u, u, u, value=-1), (u8, mask)),
        (lambda x: x.half().masked_fill(x > 0, float("inf")) * 2, (x,)),
        (lambda i: torch.threshold(i.to(torch.int8), 1.5, 127) + torch.pow(i, 2), (i,)),
    ]:
        report = fuser.explain(program, *args)
        assert report.num_kernels == 1 and report.eager_calls == []
        torch.testing.assert_close(report.result, program(*args))


# A value held in a 0-d tensor, which eager's masked_fill reads on the host (item()) and converts with the same
# checked conversion: a kernel would see it only as it runs, so the step checks it before each launch.
HOST_READ_VALUES = {
    "float32 out of float16's range": (torch.float16, torch.tensor(1e5), torch.tensor(-6e4)),
    "float64 out of float32's range": (
        torch.float32,
        torch.tensor(1e300, dtype=torch.float64),
        torch.tensor(-1e30, dtype=torch.float64),
    ),
    "int64 out of int8's range": (torch.int8, torch.tensor(300), torch.tensor(-128)),
    "nan into integers": (torch.int32, torch.tensor(float("nan")), torch.tensor(7.9)),
}


@pytest.mark.opt_in_unvalidated("the check is the runtime's, whatever the manifest says")
@pytest.mark.parametrize(
    ("dtype", "rejected", "accepted"), HOST_READ_VALUES.values(), ids=HOST_READ_VALUES.keys()
)
def test_a_zero_dim_value_eager_rejects_on_the_host_raises_compiled_too(dtype, rejected, accepted, device):
    def program(x, mask, value):
        return x.masked_fill(mask, value) * 2

    x = torch.arange(30, device=device).reshape(6, 5).to(dtype)
    mask = torch.arange(30, device=device).reshape(6, 5) % 3 == 0
    rejected, accepted = rejected.to(device), accepted.to(device)
    compiled = torch.compile(program, backend="fuser", dynamic=False)
    fuser.metrics.reset_counters()
    torch.testing.assert_close(compiled(x, mask, accepted), program(x, mask, accepted))
    with pytest.raises(Exception) as eager:
        program(x, mask, rejected)
    with pytest.raises(Exception) as at_run_time:
        compiled(x, mask, rejected)
    assert str(eager.value).splitlines()[0] in str(at_run_time.value)
    # the same graph, one kernel a call, before and after the value it refused
    torch.testing.assert_close(compiled(x, mask, accepted), program(x, mask, accepted))
    counters = fuser.metrics.counters()
    assert counters["graphs_compiled"] == 1 and counters["kernels_launched"] == 2


@pytest.mark.opt_in_unvalidated("the check is the runtime's, whatever the manifest says")
def test_a_zero_dim_value_computed_in_the_program_is_stored_and_checked(device):
    def program(x, mask, value):
        return x.half().masked_fill(mask, value * 1000) + 1

    x, mask = torch.randn(6, 5, device=device), torch.rand(6, 5, device=device) > 0.5
    with pytest.raises(Exception) as eager:
        program(x, mask, torch.tensor(100.0, device=device))
    with pytest.raises(Exception) as compiled:
        torch.compile(program, backend="fuser", dynamic=False)(x, mask, torch.tensor(100.0, device=device))
    assert str(eager.value).splitlines()[0] in str(compiled.value)
    # the value's kernel stores it, so it is in memory when the check reads it
    report = fuser.explain(program, x, mask, torch.tensor(0.5, device=device))
    assert report.num_kernels == 2 and report.eager_calls == []
    torch.testing.assert_close(report.result, program(x, mask, torch.tensor(0.5, device=device)))


@pytest.mark.parametrize("index", [0, -1, 3])
def test_a_select_out_of_range_that_tracing_let_through_raises_as_eager_does(index):
    # torch 2.11's fake select does not check its index, so on an H100 a select of row 0 of an empty tensor
    # was traced, and its kernel read out of bounds (an illegal memory access). torch 2.13 checks while
    # tracing, so that trace is planted here: traced on 5 rows, its recorded sizes replaced by an empty one.
    def program(x):
        return torch.ops.aten.select.int(x * 2, 0, index) + 1

    compiled = _traced_and_compiled(
        program, torch.randn(5, 7), planted_sizes={"x_1": torch.empty(0, 7), "mul": torch.empty(0, 7)}
    )
    with pytest.raises(IndexError, match=r"select\(\): index -?\d out of range"):
        compiled([torch.randn(0, 7)])
