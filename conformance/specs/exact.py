"""Exact float64 stand-ins for the reference program, where eager's own float64 kernel is not exact.

var_mean: eager's kernels update a running mean (Welford), which in float64 leaves a residue where the
exact mean is 0: a row of 1.5e19 and -1.5e19 has mean 0, and eager gives 512 in float32 and in float64
alike. Under `into_reduction`'s max that residue is the whole answer (512 where the row's true maximum mean
is 3.5), so a backend that summed exactly failed against both (the fuser's CPU moments, summed in double;
found by the full tier, session 39). Here the mean is the sum over the count and the variance is summed
about it (two passes), in float64; the gradients are autograd's through them. native_group_norm's saved
mean comes from the same running mean: its reference normalizes each group the same way.

eager's vectorized CPU fmod computes a - trunc(a / b) * b, which is nan wherever |a / b| passes the
dtype's range (a float32 3.4e38 over a float64 subnormal, in float64), where C's fmod, eager's scalar loop
and CUDA give the exact remainder. The reference ran that same kernel, so it was nan too, and a backend
that gave the exact remainder failed against both (docs/conformance.md). Here the value is C's fmod
(NumPy's, exact in any dtype) and remainder ATen's definition on top of it; the gradients are eager's
formulas, in float64.

hardsigmoid, hardswish and hardsigmoid_backward: ATen's kernels (CUDA's forwards, and the backward on
every device) multiply by one_sixth = 1.0f / 6.0f, a float32 constant, even in float64, so eager's float64
answer is float32-accurate (hardsigmoid_backward(1, 0) = 0.1666666716337204). A backend that divides by 6
(PyTorch's decompositions do) read as 1.8e8 float64 ulps off. Here the sixth is exact; the masks and the
boundaries are eager's.

gelu_backward with approximate='tanh': its derivative holds 1 - tanh(u)^2, which cancels as tanh nears ±1, so
the half ulp by which one tanh (SLEEF's, in ATen's vectorized CPU kernel) differs from another (glibc's in
Triton's interpreter, CUDA's) grows to several ulps of the result, and eager's float64 kernel, being the
reference, charged all of its own error to the backend: the fuser failed at 14 ulps from eager where eager was
9.0 from the true value and the fuser 6.5 (the full tier's large sample, session 42). Here the formula is
evaluated in NumPy's long double (x87's 64-bit significand on x86-64 Linux, 128-bit on aarch64 Linux; float64
where the platform has nothing wider, which still avoids the cancellation), with ATen's float64 constants and
1 - t^2 as (1 - t)(1 + t), then rounded to float64.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch


def _exact(a: torch.Tensor, b: torch.Tensor, floor: bool) -> torch.Tensor:
    """C's fmod of `a` by `b` (remainder: ATen's rule on top), broadcast, in their promoted dtype."""
    a64, b64 = (t.detach().cpu().double().numpy() for t in (a, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        result = np.fmod(a64, b64)
        if floor:  # ATen's remainder: the fmod, moved by b where its sign is not b's
            moved = (result != 0) & ((result < 0) != (b64 < 0))
            result = np.where(moved, result + b64, result)
    return torch.from_numpy(np.asarray(result)).to(torch.result_type(a, b)).to(a.device)


class _Remainder(torch.autograd.Function):
    """fmod (floor=False) or remainder (floor=True), exact, with eager's gradients."""

    @staticmethod
    def forward(ctx, a, b, floor):
        ctx.floor = floor
        ctx.save_for_backward(a, b)
        return _exact(a, b, floor)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = grad.sum_to_size(a.shape) if ctx.needs_input_grad[0] else None
        grad_b = None
        if ctx.needs_input_grad[1]:  # eager's formula: -grad * (a / b) rounded
            quotient = torch.div(a, b, rounding_mode="floor" if ctx.floor else "trunc")
            grad_b = (-grad * quotient).sum_to_size(b.shape)
        return grad_a, grad_b, None


def _exactly(op: Callable, floor: bool, inplace: bool) -> Callable:
    def reference(a, b, *rest, **kwargs):
        # The Tensor overloads: both operands are tensors, and an integer remainder is exact in eager.
        if not (a.dtype if inplace else torch.result_type(a, b)).is_floating_point:
            return op(a, b, *rest, **kwargs)
        if inplace:
            return a.copy_(_exact(a, b, floor))
        return _Remainder.apply(a, b, floor)

    return reference


def _sixth_inside(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """hardsigmoid's derivative times grad: a sixth where -3 < x < 3 (a nan x is outside), else 0."""
    dtype = torch.result_type(grad, x)
    return torch.where((x > -3) & (x < 3), grad.to(dtype) / 6, torch.zeros((), dtype=dtype))


class _Hardsigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp(x + 3, 0, 6) / 6

    @staticmethod
    def backward(ctx, seed):
        (x,) = ctx.saved_tensors
        return _sixth_inside(seed, x)


class _Hardswish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.clamp(x + 3, 0, 6) / 6

    @staticmethod
    def backward(ctx, seed):  # eager's: its constants (x / 3 + 0.5) are exact
        (x,) = ctx.saved_tensors
        return torch.ops.aten.hardswish_backward(seed, x)


# hardsigmoid_backward is specified forward only (a backward op): `_sixth_inside` itself.
SIXTHS = {
    "hardsigmoid": _Hardsigmoid.apply,
    "hardswish": _Hardswish.apply,
    "hardsigmoid_backward": _sixth_inside,
}


_GELU_BETA = 0.7978845608028654  # ATen's kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, a double
_GELU_KAPPA = 0.044715


def _gelu_backward(grad: torch.Tensor, x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """gelu_backward; the tanh approximation's in long double (erf's is well conditioned: eager's)."""
    dtype = torch.result_type(grad, x)
    if approximate != "tanh" or not dtype.is_floating_point:
        return torch.ops.aten.gelu_backward(grad, x, approximate=approximate)
    g, v = (
        t.detach().cpu().double().contiguous().numpy().astype(np.longdouble)
        for t in torch.broadcast_tensors(grad, x)
    )
    beta, kappa = np.longdouble(_GELU_BETA), np.longdouble(_GELU_KAPPA)
    with np.errstate(all="ignore"):  # inf and nan go through as eager's formula takes them
        t = np.tanh(beta * (v + kappa * v * v * v))
        inner_derivative = beta * (1 + 3 * kappa * v * v)
        derivative = 0.5 * (1 + t) + 0.5 * v * ((1 - t) * (1 + t)) * inner_derivative
        result = (g * derivative).astype(np.float64)
    return torch.from_numpy(np.asarray(result)).to(dtype).to(x.device)


def _with_exact_sixth(op: Callable, function: Callable, inplace: bool) -> Callable:
    def reference(*tensors):
        if not functools.reduce(torch.promote_types, (t.dtype for t in tensors)).is_floating_point:
            return op(
                *tensors
            )  # eager's error for an integer result; an integer grad beside a float x is exact
        if inplace:
            return tensors[0].copy_(function(*tensors))
        return function(*tensors)

    return reference


def reference_for(overload: torch._ops.OpOverload, inplace: bool) -> Callable | None:
    """The exact reference of an op whose eager float64 kernel is not exact, in place too; else None.

    fmod's and remainder's Tensor overloads, not their Scalar ones: eager reads a Scalar divisor in the
    tensor's dtype (0.1 as float32's 0.100000001), and the reference's widened tensor no longer says which
    dtype that was. hardsigmoid, hardswish and hardsigmoid_backward; gelu_backward's tanh approximation."""
    packet = overload._schema.name.split("::")[1].rstrip("_")
    if packet == "gelu_backward" and not inplace:
        return _gelu_backward
    exact = SIXTHS.get(packet) if overload._overloadname == "default" else None
    if exact is None and (packet not in ("fmod", "remainder") or overload._overloadname != "Tensor"):
        return None
    called = getattr(getattr(torch.ops.aten, f"{packet}_" if inplace else packet), overload._overloadname)
    if exact is not None:
        return _with_exact_sixth(called, exact, inplace)
    return _exactly(called, packet == "remainder", inplace)


def var_mean(x: torch.Tensor, dim=None, *, correction=None, keepdim: bool = False) -> tuple:
    """aten.var_mean.correction in two passes: the mean a sum over the count, the variance about it."""
    mean = torch.mean(x, dim=dim, keepdim=True)
    count = x.numel() // max(mean.numel(), 1)
    divisor = max(count - (1 if correction is None else correction), 0)  # ATen's: 0 gives inf or nan
    var = torch.sum((x - mean) ** 2, dim=dim, keepdim=keepdim) / divisor
    return var, mean.reshape(var.shape)


def native_group_norm(x, weight, bias, batch: int, channels: int, inner: int, groups: int, eps: float):
    """aten.native_group_norm with two-pass moments: (out, mean, rstd) as eager returns them."""
    grouped = x.reshape(batch, groups, channels // groups * inner)
    var, mean = var_mean(grouped, dim=-1, correction=0, keepdim=True)
    if grouped.shape[-1] == 0:
        mean = torch.zeros_like(mean)  # eager's mean over an empty group (its rstd is nan, as 0 / 0 gives)
    rstd = torch.rsqrt(var + eps)
    out = ((grouped - mean) * rstd).reshape(x.shape)
    per_channel = [1, channels] + [1] * (x.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    return out, mean.reshape(batch, groups), rstd.reshape(batch, groups)
