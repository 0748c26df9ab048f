"""Triton helpers for ops whose eager semantics take more than one expression.

Generated kernels call these as `lib.<name>(...)`. On a GPU they run as `@triton.jit` functions; under
Triton's interpreter `fuser.runtime` rebinds `libdevice` in a copy of this module to NumPy equivalents.
Each helper matches ATen's CPU/CUDA kernels, including the signs of zeros and nan behaviour.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def remainder_int(a, b):
    # Python-style modulus: the result takes the divisor's sign (Triton's % truncates like C).
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def remainder_float(a, b):
    r = libdevice.fmod(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def floor_divide_int(a, b):
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def floor_divide_float(a, b):
    # ATen's div_floor_floating: exact for representable quotients, where floor(a / b) can be off by one.
    mod = libdevice.fmod(a, b)
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    floordiv = libdevice.floor(div)
    floordiv = tl.where(div - floordiv > 0.5, floordiv + 1.0, floordiv)
    floordiv = tl.where(div == 0, libdevice.copysign(tl.zeros_like(div), a / b), floordiv)
    return tl.where(b == 0, a / b, floordiv)


@triton.jit
def signbit(x):
    # The sign bit itself, so -0.0 and -nan count as negative, as torch.signbit says.
    if x.dtype == tl.float64:
        bits = x.to(tl.int64, bitcast=True)
    else:
        bits = x.to(tl.float32).to(tl.int32, bitcast=True)
    return bits < 0


@triton.jit
def sign_float(x):
    # sign(nan) is nan and sign(+-0) is 0, as in ATen.
    one = tl.full(x.shape, 1.0, x.dtype)
    s = tl.where(x > 0, one, tl.where(x < 0, -one, tl.zeros_like(x)))
    return tl.where(x != x, x, s)


@triton.jit
def sign_int(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


@triton.jit
def logaddexp(a, b):
    m = tl.maximum(a, b)
    # Equal infinities would give inf - inf = nan; ATen returns the infinity itself.
    same_inf = (a == b) & (libdevice.fabs(a) == float("inf"))
    return tl.where(same_inf, a, m + libdevice.log1p(libdevice.exp(-libdevice.fabs(a - b))))


@triton.jit
def xlogy(x, y):
    r = tl.where(x == 0, tl.zeros_like(x), x * libdevice.log(y))
    return tl.where(y != y, y, r)
