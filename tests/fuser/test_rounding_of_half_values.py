"""A half-precision value is rounded alike on every path that reads it, as eager rounds it once where it
is made. Rounded on one path (a clone, a store and reload) and kept in float32 on another, a cancellation
exact in eager (and in float64) left a rounding residue. Found by the clean validation run's fuzz stage
(records/validate-cpu-all-2026-11-27.md); each test failed on the wrong value before the fix
(`Builder.made` in fuser/emit/codegen.py). They run in the default configuration: every op they reach is
validated on cpu."""

from __future__ import annotations

import torch

import fuser


def test_a_bfloat16_value_and_its_clone_are_equal(device):
    def program(x):
        quotient = x / 3
        return quotient.clone() - quotient

    x = torch.tensor(1.0, dtype=torch.bfloat16, device=device)
    compiled = torch.compile(program, backend="fuser")(x)
    assert fuser.counters()["kernels_launched"] >= 1
    assert compiled.item() == 0.0  # was -0.0007: the clone was rounded, the quotient not


def test_atan2_of_a_value_against_itself_broadcast_has_a_zero_gradient(device):
    torch.manual_seed(0)
    v = (torch.rand(1, 64, dtype=torch.float64) + 0.5).to(torch.float16).to(device).requires_grad_()

    def program(v):
        return torch.atan2(v.expand(3, 64).unsqueeze(0), v)

    (eager,) = torch.autograd.grad(program(v).sum(), [v])
    (compiled,) = torch.autograd.grad(torch.compile(program, backend="fuser")(v).sum(), [v])
    assert fuser.counters()["kernels_launched"] >= 1
    assert torch.equal(eager, torch.zeros_like(eager))
    torch.testing.assert_close(compiled, eager, atol=0, rtol=0)


def test_a_0dim_float32_divisor_or_factor_of_a_half_tensor_is_taken_as_eager_takes_it(device):
    # Eager's CPU mul and div take a 0-dim second operand at its own float32 value ("CPU scalar"), where
    # every other path rounds it to the half dtype first: 3 / 1e5 is 3e-05 there, not 3 / inf = 0. Found by
    # the fuzzer in the default configuration (docs/fuzz.md, session 36); fused, it was 0 before the fix.
    def program(x, y):
        return x / y, x * y, x + y, y * x, torch.div(x, y, rounding_mode="floor"), torch.floor_divide(x, y)

    for dtype in (torch.float16, torch.bfloat16):
        x = torch.tensor([3.0, -0.5, 1000.0], dtype=dtype, device=device)
        for value in (1e5, 1e-5, 1.0001):
            y = torch.tensor(value, device=device)
            eager = program(x, y)
            launched = fuser.counters()["kernels_launched"]
            compiled = torch.compile(program, backend="fuser")(x, y)
            assert fuser.counters()["kernels_launched"] > launched
            for e, c in zip(eager, compiled, strict=True):
                torch.testing.assert_close(c, e, atol=0, rtol=0, equal_nan=True)


def test_sigmoid_backward_of_mixed_half_operands_computes_in_their_common_dtype(device):
    # A float16 gradient beside a bfloat16 output gives a float32 result, which eager's kernel computes in
    # float32; the fuser's decomposition rounded 1 - y to bfloat16 first, 153 float32 ulps off (found by the
    # conformance suite's float16 full tier, session 37).
    def program(grad, y):
        return torch.ops.aten.sigmoid_backward(grad, y)

    generator = torch.Generator().manual_seed(0)
    for grad_dtype, y_dtype in ((torch.float16, torch.bfloat16), (torch.bfloat16, torch.bfloat16)):
        grad = (torch.randn(37, 7, generator=generator) * 3).to(grad_dtype).to(device)
        y = torch.rand(37, 7, generator=generator).to(y_dtype).to(device)
        launched = fuser.counters()["kernels_launched"]
        compiled = torch.compile(program, backend="fuser")(grad, y)
        assert fuser.counters()["kernels_launched"] > launched
        torch.testing.assert_close(compiled, program(grad, y), atol=0, rtol=0)
