"""tanh-gelu's fast float32 form (issue 29 item 5): on CUDA a single-instruction exp2 and reciprocal
(`lib.exp2_ftz`, `lib.rcp_ftz`), on the CPU libdevice's fast division, whose interpreter stand-in gives
what CUDA's does where they differ: 0 where the divisor passes 2^126."""

from __future__ import annotations

import re

import pytest
import torch
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from fuser.interpreter import libdevice
from tests.fuser.test_half_narrowing import cuda_kernels, ptx

aten = torch.ops.aten


def tanh_gelu(dtype):
    def build(g):
        x = g.input((37, 7), dtype)
        return (g.call(aten.gelu.default, x, approximate="tanh"),)

    return build


def opcodes(text: str) -> set[str]:
    return set(re.findall(r"^\s*(?:@%p\d+\s+)?([a-z][a-z0-9]*(?:\.[a-z0-9]+)*)", text, re.MULTILINE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cuda_tanh_gelu_is_one_exp2_and_one_reciprocal_an_element(dtype):
    (kernel,) = cuda_kernels(tanh_gelu(dtype))
    assert "lib.rcp_ftz(1.0 + lib.exp2_ftz(" in kernel.source
    found = opcodes(ptx(kernel))
    assert {"ex2.approx.ftz.f32", "rcp.approx.ftz.f32"} <= found, sorted(found)
    assert not any(op.startswith(("div.", "ex2.approx.f32")) for op in found), sorted(found)


def test_float64_tanh_gelu_keeps_its_exact_division():
    (kernel,) = cuda_kernels(tanh_gelu(torch.float64))
    assert "_ftz" not in kernel.source and "fast_dividef" not in kernel.source
    assert "div.rn.f64" in opcodes(ptx(kernel))


def test_cpu_tanh_gelu_calls_the_fast_division_the_interpreter_stands_in_for():
    (kernel,) = cuda_kernels(tanh_gelu(torch.float32), device="cpu")
    assert "libdevice.fast_dividef(" in kernel.source and "_ftz" not in kernel.source


def block(values) -> tl.tensor:
    data = torch.tensor(values, dtype=torch.float32).numpy()
    return tl.tensor(TensorHandle(data, tl.float32), tl.block_type(tl.float32, [len(values)]))


def test_the_fast_division_stand_in_is_zero_where_the_gpu_flushes_the_reciprocal():
    big = 2.0**126
    x = block([3.0, -3.0, 3.0, float("inf"), 1.0, 6.0, -0.0, 5.0])
    y = block([big * 1.5, big * 1.5, -float("inf"), big * 2, big, 3.0, 2.0, 2.0])
    got = torch.from_numpy(libdevice.fast_dividef(x, y).handle.data.copy())
    assert got[:3].eq(0).all() and got[:3].signbit().tolist() == [False, True, True]
    assert got[3].isnan()  # an infinite dividend where the divisor is flushed: inf times 0
    assert got[4] == 1.0 / big and got[5:].tolist() == [2.0, -0.0, 2.5]  # at 2^126 and below: x / y
