"""fmod's and remainder's float64 reference is exact (`conformance.specs.exact`): eager's vectorized CPU
fmod is nan wherever |a / b| passes the dtype's range, and the reference used to run that same kernel, so a
backend giving the exact remainder failed against both (docs/conformance.md, session 27)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from conformance.harness.runner import Program
from conformance.specs.catalog import SPECS
from conformance.specs.samples import Sample

# 256 elements all take eager's vectorized loop (no scalar tail); a float32 maximum over a float64
# subnormal overflows double there.
BIG = torch.full((256,), 3.4028234663852886e38, dtype=torch.float64)
TINY = torch.full((256,), 5e-324, dtype=torch.float64)


def reference_program(op: str, spec=None):
    spec = spec or SPECS[op]
    return Program(
        spec, "alone", [Sample((BIG, TINY), {}, "a float32 maximum over a float64 subnormal")], reference=True
    ).function()


@pytest.mark.parametrize("op", ["aten.fmod.Tensor", "aten.remainder.Tensor"])
def test_the_reference_is_exact_where_eager_s_float64_kernel_overflows(op):
    eager = getattr(torch, op.split(".")[1])(BIG, TINY)
    assert eager.isnan().all()  # the kernel the reference used to run
    (result,) = reference_program(op)(BIG.clone(), TINY.clone())
    assert torch.equal(result, torch.from_numpy(np.fmod(BIG.numpy(), TINY.numpy())))  # 0: exact
    without = dataclasses.replace(SPECS[op], reference=None)
    (plain,) = reference_program(op, without)(BIG.clone(), TINY.clone())
    assert plain.isnan().all()  # what the oracle compared against before


@pytest.mark.parametrize("op", ["aten.fmod_.Tensor", "aten.remainder_.Tensor"])
def test_the_in_place_reference_writes_the_exact_remainder(op):
    target = BIG.clone()
    reference_program(op)(target, TINY.clone())
    assert torch.equal(target, torch.zeros_like(BIG))


@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_values_and_gradients_match_eager_where_eager_is_exact(name):
    torch.manual_seed(0)
    a = (torch.randn(5, 7, dtype=torch.float64) * 10).requires_grad_()
    b = (torch.randn(7, dtype=torch.float64) + 3).requires_grad_()
    eager = getattr(torch, name)(a, b)
    (result,) = reference_program(f"aten.{name}.Tensor")(a, b)
    assert torch.equal(result, eager)  # remainder's sign follows the divisor's, as ATen's
    seed = torch.randn(5, 7, dtype=torch.float64)
    assert all(torch.equal(x, y) for x, y in zip(
        torch.autograd.grad(result, (a, b), seed), torch.autograd.grad(eager, (a, b), seed), strict=True
    ))  # fmt: skip
