"""NumPy stand-ins for the CUDA libdevice functions that generated kernels call.

Triton's interpreter runs a kernel's `tl.*` calls on NumPy arrays but has no libdevice. When a kernel
is loaded for CPU tensors, `fuser.runtime` binds the name `libdevice` in the kernel's module to this
module instead, so the same kernel source runs on both. Values arrive here already widened to fp32 or
fp64 (or as integers), and each result keeps the dtype of its widest operand, as libdevice does.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

try:  # Triton's interpreter carries exact fused multiply-adds
    from triton._C.libtriton import interpreter as _triton_interpreter
except ImportError:  # pragma: no cover
    _triton_interpreter = None


def _data(x):
    return x.handle.data if isinstance(x, tl.tensor) else np.asarray(x)


def _wrap(result: np.ndarray, like: tl.tensor) -> tl.tensor:
    # The operand with the most elements gives the block type (the others broadcast against it).
    result = np.asarray(result).astype(like.handle.data.dtype, copy=False)
    return tl.tensor(TensorHandle(result, like.dtype.scalar), like.type)


def _widest(*args) -> tl.tensor:
    tensors = [a for a in args if isinstance(a, tl.tensor)]
    return max(tensors, key=lambda t: t.handle.data.size)


def _elementwise(fn: Callable) -> Callable:
    def apply(*args):
        with np.errstate(all="ignore"):
            return _wrap(fn(*(_data(a) for a in args)), _widest(*args))

    apply.__name__ = getattr(fn, "__name__", "libdevice_fn")
    # What it computes with: a validation fingerprint names it (fuser.lower.lowerings).
    apply.stands_in_with = fn
    return apply


def _in_float64(fn: Callable) -> Callable:
    """`fn` with float32 operands computed in float64, its result rounded once to float32 (`_wrap`): so
    correctly rounded but at ties. NumPy's float32 transcendental functions are often an ulp further from
    exact than eager's CPU kernels (on 400,001 values: log10 at 62 %, atan2 37 %, tan 25 %, pow 20 %;
    docs/fuzz.md), and a later op can turn that ulp into another answer: pow(-w, -w) is nan or finite as
    w came out whole or not, floor(log10(x)) a digit apart."""

    def widened(*operands):
        return fn(*(x.astype(np.float64) if x.dtype == np.float32 else x for x in operands))

    widened.__name__ = getattr(fn, "__name__", "libdevice_fn")
    widened.wraps = fn  # a fingerprint names `fn`, computed in float64 (fuser.lower.lowerings)
    return widened


def _vectorized(scalar_fn: Callable) -> Callable:
    # For functions NumPy lacks: apply the math module's version element by element in float64.
    vec = np.vectorize(scalar_fn, otypes=[np.float64])
    apply = _elementwise(lambda x: vec(x.astype(np.float64)))
    apply.stands_in_with = scalar_fn
    return apply


def _erfinv(y: np.ndarray) -> np.ndarray:
    # SciPy's double-precision inverse: within 3 ulps of the exact value (against mpmath, 200,000 points
    # over (-1, 1) and its tails), where CUDA documents 5 for libdevice's; float32 operands round it once. Refining a guess by Newton steps on erf(x) = y, as this
    # stand-in once did, fails near ±1: erf is flat there and cannot see y's last bits (erfinv(1 - 2**-53)
    # came out 5.46, not 5.86).
    from scipy import special  # as for i1 below

    return special.erfinv(y.astype(np.float64))


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C99 pow, as libdevice's: NumPy differs at a base of -inf or -0 (it takes a scalar exponent of 0.5
    as sqrt, so pow(-inf, 0.5) is nan and pow(-0.0, 0.5) is -0.0, where C gives +inf and +0.0)."""
    result = np.power(x, y)
    dtype = result.dtype
    odd = np.abs(np.fmod(y, 2)) == 1  # an odd integer exponent keeps the base's sign
    result = np.where((x == -np.inf) & (y > 0), np.where(odd, -np.inf, np.inf), result)
    result = np.where((x == -np.inf) & (y < 0), np.where(odd, -0.0, 0.0), result)
    result = np.where((x == 0) & (y > 0), np.where(odd, x, 0.0), result)
    result = np.where((x == 0) & (y < 0), np.where(odd, np.copysign(np.inf, x), np.inf), result)
    return np.where((y == 0) | (x == 1), 1.0, result).astype(dtype)


def _fma(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """x * y + z rounded once, as libdevice's fma (NumPy has none)."""
    dtype = np.result_type(x, y, z)
    x, y, z = np.broadcast_arrays(*(np.asarray(v, dtype=dtype) for v in (x, y, z)))
    native = getattr(_triton_interpreter, f"fma_fp{dtype.itemsize * 8}", None)
    if native is not None:
        return native(np.ascontiguousarray(x), np.ascontiguousarray(y), np.ascontiguousarray(z))
    # Older Tritons lack them. A float32 product is exact in float64, and a float64 one overflows no
    # wider float (x86's long double): either rounds twice only where the wide sum is inexact.
    wide = np.float64 if dtype.itemsize < 8 else np.longdouble
    return (x.astype(wide) * y.astype(wide) + z.astype(wide)).astype(dtype)


exp = _elementwise(_in_float64(np.exp))
exp2 = _elementwise(_in_float64(np.exp2))
expm1 = _elementwise(_in_float64(np.expm1))
log = _elementwise(_in_float64(np.log))
log2 = _elementwise(_in_float64(np.log2))
log10 = _elementwise(_in_float64(np.log10))
log1p = _elementwise(_in_float64(np.log1p))
sqrt = _elementwise(np.sqrt)
rsqrt = _elementwise(lambda x: 1.0 / np.sqrt(x))
sin = _elementwise(_in_float64(np.sin))
cos = _elementwise(_in_float64(np.cos))
tan = _elementwise(_in_float64(np.tan))
asin = _elementwise(_in_float64(np.arcsin))
acos = _elementwise(_in_float64(np.arccos))
atan = _elementwise(_in_float64(np.arctan))
sinh = _elementwise(_in_float64(np.sinh))
cosh = _elementwise(_in_float64(np.cosh))
tanh = _elementwise(_in_float64(np.tanh))
asinh = _elementwise(_in_float64(np.arcsinh))
acosh = _elementwise(_in_float64(np.arccosh))
atanh = _elementwise(_in_float64(np.arctanh))
erf = _vectorized(math.erf)
erfc = _vectorized(math.erfc)
erfinv = _elementwise(_erfinv)


def _lgamma(v: float) -> float:
    # lgamma has poles at 0 and the negative integers, where libdevice (and ATen) return +inf and the
    # math module raises instead; -inf gives +inf, and so does overflow.
    if v == -math.inf or (v <= 0 and v.is_integer()):
        return math.inf
    try:
        return math.lgamma(v)
    except OverflowError:
        return math.inf


lgamma = _vectorized(_lgamma)
cyl_bessel_i0 = _elementwise(np.i0)


def _i1(x: np.ndarray) -> np.ndarray:
    from scipy import special  # NumPy has i0 but no i1

    return special.i1(x)


cyl_bessel_i1 = _elementwise(_i1)
floor = _elementwise(np.floor)
ceil = _elementwise(np.ceil)
trunc = _elementwise(np.trunc)
nearbyint = _elementwise(np.rint)
fmod = _elementwise(np.fmod)
pow = _elementwise(_in_float64(_pow))
atan2 = _elementwise(_in_float64(np.arctan2))
hypot = _elementwise(np.hypot)
copysign = _elementwise(np.copysign)
nextafter = _elementwise(np.nextafter)
fma = _elementwise(_fma)
div_rn = _elementwise(np.divide)


def _fast_dividef(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """CUDA's __fdividef: x / y, but 0 (x times a zero of y's sign: nan for an infinite x) where |y|
    passes 2^126, since the GPU multiplies by a reciprocal it flushes there. Rounded once here, where the
    GPU's is within 2 ulps."""
    return np.where(np.abs(y) > np.float32(2.0**126), x * np.copysign(np.float32(0.0), y), np.divide(x, y))


fast_dividef = _elementwise(_fast_dividef)
