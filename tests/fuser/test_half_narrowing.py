"""Half values widened where LLVM would narrow their float32 arithmetic wrongly on CUDA (`fuser.narrowing`).

The kernels are generated for CUDA from fake tensors and compiled for sm_90 here (Triton's compiler and
ptxas, no GPU), and their PTX read: where the fuser's source says float32, no float16 multiply or
comparison may appear. The installed Triton narrows both patterns when they are written plainly (seen
failing with `hides_widening` forced off: `mul.f16` and `setp.ge.f16` in the PTX); on the lent H200 the
narrowed kernels gave nan for inf * 2**-126 and 0 for hardtanh_backward's gradient at float16(0.1)."""

from __future__ import annotations

import re

import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fuser.generation import plan_and_generate
from fuser.options import Options
from fuser.probes import _Graph
from fuser.runtime.kernel_cache import kernel_file, load_file

aten = torch.ops.aten
SIGNATURE_TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.bool: "i1"}
HALF_PTX = re.compile(r"\b(?:mul|add|sub|fma|setp)\.[\w.]*f16\b")


def cuda_kernels(build, device="cuda"):
    """The kernels the fuser generates for the graph `build(g)` makes over fake tensors on `device`."""
    g = _Graph(device)
    plan, generated = plan_and_generate(g.output(*build(g)), Options(unvalidated="fuse"), set())
    return [k for step in plan.steps for k in generated.variants(step) or ()]


def ptx(kernel) -> str:
    """`kernel` compiled for sm_90 (the signature from its parameters' dtypes), as PTX."""
    signature = {}
    for name, arg in kernel.params:
        if arg.kind in ("tensor", "output"):
            signature[name] = "*" + SIGNATURE_TYPES[arg.node.meta["val"].dtype]
        else:
            signature[name] = "i32"
    signature["BLOCK"] = "constexpr"
    path = kernel_file(kernel)
    jit_fn = load_file(path, kernel.name)
    compiled = triton.compile(ASTSource(jit_fn, signature, {"BLOCK": 128}), target=GPUTarget("cuda", 90, 32))
    return compiled.asm["ptx"]


def float16_times_bfloat16(g):
    x, y = g.input((37, 7), torch.float16), g.input((37, 7), torch.bfloat16)
    return (g.call(aten._to_copy.default, g.call(aten.mul.Tensor, x, y), dtype=torch.float16),)


def outside_hardtanh_bounds(bound):
    """hardtanh_backward's test as AOTAutograd decomposes it for float16: in float32, against the bounds."""

    def build(g):
        wide = g.call(aten._to_copy.default, g.input((37, 7), torch.float16), dtype=torch.float32)
        below, above = g.call(aten.le.Scalar, wide, -2.0), g.call(aten.ge.Scalar, wide, bound)
        return (g.call(aten.bitwise_or.Tensor, below, above),)

    return build


def float16_only(g):
    x, y = g.input((37, 7), torch.float16), g.input((37, 7), torch.float16)
    return (g.call(aten.mul.Tensor, x, y),)


@pytest.mark.parametrize(
    "build", [float16_times_bfloat16, outside_hardtanh_bounds(0.1)], ids=["mixed halves", "inexact bound"]
)
def test_kernels_llvm_would_narrow_wrongly_stay_float32_on_cuda(build):
    (kernel,) = cuda_kernels(build)
    assert "lib.widen_opaque(" in kernel.source
    narrowed = HALF_PTX.findall(ptx(kernel))
    assert not narrowed, f"float16 arithmetic in the PTX of a float32 kernel: {narrowed}\n{kernel.source}"


@pytest.mark.parametrize(
    "build", [float16_only, outside_hardtanh_bounds(0.5)], ids=["one half type", "exact bound"]
)
def test_other_kernels_keep_the_plain_conversion(build):
    """Narrowing them is exact, so their source (and every validation fingerprint) stays as it was."""
    (kernel,) = cuda_kernels(build)
    assert "widen_opaque" not in kernel.source
    assert ".to(tl.float32)" in kernel.source


def test_interpreted_kernels_never_widen_opaquely():
    (kernel,) = cuda_kernels(float16_times_bfloat16, device="cpu")
    assert "widen_opaque" not in kernel.source
