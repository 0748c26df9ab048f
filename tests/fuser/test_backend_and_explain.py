"""The backend is found by name, explain shows what was fused, and indexing widens past 2^31."""

from __future__ import annotations

import subprocess
import sys

import torch

import fuser


def test_the_backend_is_registered_by_entry_point_without_importing_fuser():
    script = (
        "import sys, torch\n"
        "assert 'fuser' not in sys.modules\n"
        "f = torch.compile(lambda x: torch.sin(x) * 2 + 1, backend='fuser', options={'strict': True})\n"
        "x = torch.randn(5, 3)\n"
        "torch.testing.assert_close(f(x), torch.sin(x) * 2 + 1)\n"
        "import fuser\n"
        "print(fuser.counters()['kernels_launched'])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "1"


def test_explain_shows_groups_and_readable_source(device):
    def program(x, y):
        return torch.relu(x * y + 1.0).to(torch.bfloat16)

    report = fuser.explain(program, torch.randn(6, 4, device=device), torch.randn(4, device=device))
    text = str(report)
    assert "1 graph(s), 1 kernel(s), 0 eager call(s)" in text
    (source,) = report.sources
    assert "#   mul = aten.mul.Tensor(arg0_1, arg1_1)" in source
    assert "#   relu = aten.relu.default(add)" in source
    assert (
        "@triton.jit" in source
        and "tl.store(out0_ptr + offset, lib.narrow_bf16(_to_copy0), mask=mask)" in source
    )
    assert source in text


def test_training_graphs_compile_forward_and_backward(device):
    x = torch.randn(7, 5, device=device, requires_grad=True)
    w = torch.randn(5, device=device, requires_grad=True)

    def program(x, w):
        return (torch.tanh(x * w) * 2.0).sum()

    compiled = fuser.compile(program, strict=True)
    compiled(x, w).backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad, w.grad = None, None
    program(x, w).backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], w.grad)
    assert fuser.counters()["graphs_compiled"] == 2  # forward and backward


def test_indexing_switches_to_int64_when_an_offset_passes_2_to_the_31(device):
    # 2^31 + 1 bytes: a step-sliced view whose last element sits past the int32 range.
    storage = torch.zeros(2**31 + 1, dtype=torch.int8, device=device)
    storage[2**31] = 5
    storage[2**30] = 3
    view = storage[:: 2**30]  # elements at 0, 2^30 and 2^31
    report = fuser.explain(lambda v: v * 2 + 1, view)
    assert "int64 indexing" in report.sources[0]
    assert report.result.tolist() == [1, 7, 11]


def test_a_collecting_block_also_sees_the_graphs_of_blocks_inside_it(device):
    x = torch.randn(5, device=device)
    with fuser.collecting() as outer:
        report = fuser.explain(lambda t: t * 2 + 1, x)
        with fuser.collecting() as inner:
            torch.compile(lambda t: t.exp(), backend="fuser")(x)
    assert len(report.graphs) == 1 and len(inner) == 1
    assert outer == [*report.graphs, *inner]
