"""Half values widened where LLVM would narrow their float32 arithmetic wrongly on CUDA (`fuser.emit.narrowing`).

The kernels are generated for CUDA from fake tensors and compiled for sm_90 here (Triton's compiler and
ptxas, no GPU), and their PTX read: where the fuser's source says float32 over values of both half types,
no float16 arithmetic may appear. The installed Triton narrows it when written plainly (seen failing with
`hides_widening` forced off: `mul.f16` in the PTX); on the lent H200 the narrowed kernel gave nan for
float16 inf times bfloat16 2**-126, where eager gives inf."""

from __future__ import annotations

import re

import pytest
import torch

from fuser.emit.generation import plan_and_generate
from fuser.options import Options
from fuser.runtime import gpu_compile_check
from fuser.runtime.kernel_cache import kernel_file, load_file
from fuser.validate.probes import _Graph

aten = torch.ops.aten
HALF_PTX = re.compile(r"\b(?:mul|add|sub|fma|setp)\.[\w.]*f16\b")


def cuda_kernels(build, device="cuda"):
    """The kernels the fuser generates for the graph `build(g)` makes over fake tensors on `device`."""
    g = _Graph(device)
    plan, generated = plan_and_generate(g.output(*build(g)), Options(unvalidated="fuse"), set())
    return [k for step in plan.steps for k in generated.variants(step) or ()]


def ptx(kernel) -> str:
    """`kernel` compiled for sm_90 through Triton's binder, as a launch would (`fuser.runtime.gpu_compile_check`),
    with small CPU tensors of each parameter's dtype standing in; its PTX."""
    jit_fn = load_file(kernel_file(kernel), kernel.name)
    args = []
    for _, arg in kernel.params:
        if arg.kind in ("tensor", "output"):
            args.append(torch.empty(64, dtype=arg.node.meta["val"].dtype))
        elif arg.kind == "partials":
            args.append(torch.empty(64, dtype=arg.dtype))
        else:
            args.append(7)
    blocks = {p.name: 16 for p in jit_fn.params if p.is_constexpr}
    return gpu_compile_check.compile_for_cuda(jit_fn, args, blocks, 90).asm["ptx"]


def float16_times_bfloat16(g):
    x, y = g.input((37, 7), torch.float16), g.input((37, 7), torch.bfloat16)
    return (g.call(aten._to_copy.default, g.call(aten.mul.Tensor, x, y), dtype=torch.float16),)


def float16_product_as_bfloat16(g):
    """One half type in, the other out: the kernel holds both."""
    x, y = g.input((37, 7), torch.float16), g.input((37, 7), torch.float16)
    return (g.call(aten._to_copy.default, g.call(aten.mul.Tensor, x, y), dtype=torch.bfloat16),)


def float16_times_bfloat16_summed(g):
    """The same product reduced over rows: a row kernel."""
    x, y = g.input((37, 7), torch.float16), g.input((37, 7), torch.bfloat16)
    return (g.call(aten.sum.dim_IntList, g.call(aten.mul.Tensor, x, y), [1]),)


def float16_only(g):
    x, y = g.input((37, 7), torch.float16), g.input((37, 7), torch.float16)
    return (g.call(aten.mul.Tensor, x, y),)


@pytest.mark.parametrize(
    "build",
    [float16_times_bfloat16, float16_product_as_bfloat16, float16_times_bfloat16_summed],
    ids=["pointwise", "stored as the other type", "rows"],
)
def test_kernels_llvm_would_narrow_wrongly_stay_float32_on_cuda(build):
    kernels = cuda_kernels(build)
    assert kernels
    for kernel in kernels:
        reads_halves = any(a.kind == "tensor" for _, a in kernel.params)
        assert ("lib.widen_opaque(" in kernel.source) == reads_halves, kernel.source
        narrowed = HALF_PTX.findall(ptx(kernel))
        assert not narrowed, f"float16 arithmetic in the PTX of a float32 kernel: {narrowed}\n{kernel.source}"


def test_kernels_of_one_half_type_keep_the_plain_conversion():
    """Narrowing them is exact, so their source (and every validation fingerprint) stays as it was."""
    (kernel,) = cuda_kernels(float16_only)
    assert "widen_opaque" not in kernel.source
    assert ".to(tl.float32)" in kernel.source


def test_interpreted_kernels_never_widen_opaquely():
    (kernel,) = cuda_kernels(float16_times_bfloat16, device="cpu")
    assert "widen_opaque" not in kernel.source
