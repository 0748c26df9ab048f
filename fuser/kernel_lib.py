"""Triton helpers for ops whose eager semantics take more than one expression.

Generated kernels call these as `lib.<name>(...)`. On a GPU they run as `@triton.jit` functions; under
Triton's interpreter `fuser.interpreter.shim` rebinds `libdevice` in a copy of this module to NumPy
equivalents. Each helper matches ATen's CPU/CUDA kernels, including the signs of zeros and nan behaviour.

Helpers use only builtins: `tl.zeros_like` and other `@triton.jit` functions of triton.language cannot
be called from the interpreter's plain-function copies of these helpers.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice

# On a GPU, Triton links libdevice flushing float32 subnormals to zero unless a kernel is compiled with
# `enable_reflect_ftz=False`; the fuser launches every GPU kernel so
# (fuser.runtime.launch_config.gpu_compile_options), so libdevice's div_rn, fmod, hypot, floor, ceil and
# fma keep subnormals as eager's CUDA kernels do. What still needs a helper below is where libdevice or
# Triton differ from ATen in more than that.


@triton.jit
def _unflush_scale(x, y):
    # 2**64 where both operands lie below 2**-64 (scaling them is exact and makes every subnormal normal,
    # without overflow), else 1.
    small = (tl.abs(x) < 5.421010862427522e-20) & (tl.abs(y) < 5.421010862427522e-20)
    return tl.where(small, 18446744073709551616.0, 1.0)


@triton.jit
def atan2(y, x):
    # atan2 depends only on the ratio, so scaling both operands by a power of two changes nothing. Even
    # with subnormals kept, libdevice's atan2 differed from eager's at 5 of 100 pairs of tiny operands on
    # the H100 (tools/probes/reflect_ftz.py); scaled out of the subnormal range, it matches.
    y, x = tl.broadcast(y, x)
    s = _unflush_scale(y, x)
    return libdevice.atan2(y * s, x * s)


@triton.jit
def remainder_int(a, b):
    # Python-style modulus: the result takes the divisor's sign (Triton's % truncates like C).
    a, b = tl.broadcast(a, b)  # a 0-d operand's comparisons are combined with a block's below
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def remainder_float(a, b):
    a, b = tl.broadcast(a, b)
    r = libdevice.fmod(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def floor_divide_int(a, b):
    a, b = tl.broadcast(a, b)
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def floor_divide_float(a, b):
    # ATen's div_floor_floating: exact for representable quotients, where floor(a / b) can be off by one.
    a, b = tl.broadcast(a, b)
    mod = libdevice.fmod(a, b)
    div = libdevice.div_rn(a - mod, b)  # correctly rounded: Triton's `/` is approximate on a GPU
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    floordiv = libdevice.floor(div)  # div is an integer, zero or huge here: never subnormal
    floordiv = tl.where(div - floordiv > 0.5, floordiv + 1.0, floordiv)
    quotient = libdevice.div_rn(a, b)
    floordiv = tl.where(div == 0, libdevice.copysign(tl.full(div.shape, 0.0, div.dtype), quotient), floordiv)
    return tl.where(b == 0, quotient, floordiv)


@triton.jit
def neg(x):
    # The sign bit flipped, so -0.0 and nan keep their signs as eager's negation does. Triton 3.6's
    # unary minus is 0 - x (0 - (+0.0) is +0.0, not -0.0); Triton 3.9's is a real negation.
    if x.dtype == tl.float64:
        return (x.to(tl.int64, bitcast=True) ^ tl.full([], -(2**63), tl.int64)).to(tl.float64, bitcast=True)
    elif x.dtype == tl.float32:
        return (x.to(tl.int32, bitcast=True) ^ tl.full([], -(2**31), tl.int32)).to(tl.float32, bitcast=True)
    else:  # integers (kernels hold half types as float32: fuser.lower.dtypes.value_dtype)
        return -x


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
    # ATen's (0 < x) - (x < 0): sign(+-0) is +0 and sign(nan) is 0.
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


@triton.jit
def sign_int(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


@triton.jit
def logaddexp(a, b):
    a, b = tl.broadcast(a, b)  # a 0-d operand's comparisons are combined with a block's below
    m = tl.maximum(a, b)
    # Equal infinities would give inf - inf = nan; ATen returns the infinity itself.
    same_inf = (a == b) & (tl.abs(a) == float("inf"))
    return tl.where(same_inf, a, m + libdevice.log1p(libdevice.exp(-tl.abs(a - b))))


@triton.jit
def i0e(x):
    # exp(-|x|) * i0(x), without its overflow: i0 overflows (float32 near 90, float64 near 713) while
    # i0e stays finite and tends to 0, so exp(-|x|) * i0(x) gave inf * 0 = nan there (and at inf). From
    # |x| = 80 on, the asymptotic series 1 / sqrt(2 pi a) * sum_k ((2k-1)!!)^2 / (k! 8^k a^k), 9 terms,
    # is within an ulp of float64's i0e (checked against scipy.special.i0e at 80, 100, 700 and 1e4).
    a = tl.abs(x)
    r = 1.0 / a
    s = 6.074042001273483 * r + 1.7277275025844574
    s = s * r + 0.5725014209747314
    s = s * r + 0.22710800170898438
    s = s * r + 0.112152099609375
    s = s * r + 0.0732421875
    s = s * r + 0.0703125
    s = s * r + 0.125
    s = s * r + 1.0
    large = s / libdevice.sqrt(6.283185307179586 * a)
    return tl.where(a < 80.0, libdevice.exp(-a) * libdevice.cyl_bessel_i0(a), large)


@triton.jit
def xlogy(x, y):
    r = tl.where(x == 0, tl.full(x.shape, 0.0, x.dtype), x * libdevice.log(y))
    return tl.where(y != y, y, r)


@triton.jit
def round_to_bf16(x):
    # float32 rounded to nearest-even at bfloat16's precision, still as float32 (so any later
    # conversion to bfloat16 is exact, whatever rounding it does). Overflow rounds to inf, as in c10.
    bits = x.to(tl.int32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
    return tl.where(x != x, x, rounded.to(tl.float32, bitcast=True))


@triton.jit
def widen_bf16(x):
    # On a GPU the conversions are exact (widening) and round to nearest-even (narrowing), as c10's do.
    # Triton's interpreter flushes bfloat16 subnormals and truncates: fuser.interpreter.bf16 replaces both
    # there with bit-exact NumPy versions.
    return x.to(tl.float32)


@triton.jit
def widen_opaque(x):
    # A half value as float32 through an instruction LLVM cannot see into, so it cannot narrow the
    # float32 arithmetic that follows back to half precision (fuser.emit.narrowing: where that is unsound).
    # CUDA only: kernels for the interpreter never call it.
    wide = x.to(tl.float32)
    return tl.inline_asm_elementwise(
        "mov.b32 $0, $1;", "=r,r", [wide], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def exp2_ftz(x):
    # 2^x in one instruction, subnormals flushed: the fuser's kernels are built with subnormals kept
    # (launch_config.gpu_compile_options), which costs exp2 a range check and two multiplies. For a caller
    # that adds 1 to the result, as tanh-gelu does, the flush changes nothing. CUDA only.
    return tl.inline_asm_elementwise(
        "ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def rcp_ftz(x):
    # 1/x within an ulp in one instruction, subnormals flushed: 0 where |x| passes 2^126, as CUDA's fast
    # division (__fdividef) gives. CUDA only.
    return tl.inline_asm_elementwise(
        "rcp.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def narrow_bf16(x):
    return x.to(tl.bfloat16)


@triton.jit
def pow_int(a, b):
    # ATen's powi: exponentiation by squaring, wrapping on overflow; a negative exponent gives 1 for a
    # base of 1, +-1 for -1 and 0 otherwise.
    a, b = tl.broadcast(a, b)
    result = tl.full(a.shape, 1, a.dtype)
    base = a
    e = b
    for _ in tl.static_range(63):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    # -one rather than a literal -1: Triton refuses a negative literal beside an unsigned tensor (where
    # b < 0 never holds).
    one = tl.full(a.shape, 1, a.dtype)
    negative = tl.where(a == 1, one, tl.where(a == -one, tl.where((b & 1) != 0, -one, one), one - one))
    return tl.where(b < 0, negative, result)


@triton.jit
def _step_half_bits(x, y, bits):
    # One step of nextafter on the bits of a 16-bit float: away from zero when y lies beyond x,
    # else toward it; from zero, to the smallest subnormal with y's sign (0x0001 or 0x8001).
    step = tl.where((y > x) == (x > 0), 1, -1).to(tl.int16)
    smallest = tl.where(y > 0, 1, -32767).to(tl.int16)
    return tl.where(x == 0, smallest, bits + step)


@triton.jit
def nextafter_fp16(x, y):
    # x and y are float16 values held in float32.
    x, y = tl.broadcast(x, y)
    bits = _step_half_bits(x, y, x.to(tl.float16).to(tl.int16, bitcast=True))
    stepped = bits.to(tl.float16, bitcast=True).to(tl.float32)
    return tl.where((x != x) | (y != y), x + y, tl.where(x == y, y, stepped))


@triton.jit
def nextafter_bf16(x, y):
    # x and y are bfloat16 values held in float32: a bfloat16 is the top half of a float32's bits.
    x, y = tl.broadcast(x, y)
    top = (x.to(tl.int32, bitcast=True) >> 16).to(tl.int16)
    bits = _step_half_bits(x, y, top).to(tl.int32) << 16
    stepped = bits.to(tl.float32, bitcast=True)
    return tl.where((x != x) | (y != y), x + y, tl.where(x == y, y, stepped))


# --- combine functions for reductions (tl.reduce) ---


@triton.jit
def multiply(a, b):
    return a * b


@triton.jit
def maximum_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def minimum_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def argmax_combine(a, a_index, b, b_index):
    # The larger value wins; nan beats everything; ties (equal values, or two nans) go to the first index.
    a_nan = a != a
    b_nan = b != b
    tie = ((a == b) | (a_nan & b_nan)) & (a_index < b_index)
    pick_a = (a > b) | (a_nan & ~b_nan) | tie
    return tl.where(pick_a, a, b), tl.where(pick_a, a_index, b_index)


@triton.jit
def argmin_combine(a, a_index, b, b_index):
    a_nan = a != a
    b_nan = b != b
    tie = ((a == b) | (a_nan & b_nan)) & (a_index < b_index)
    pick_a = (a < b) | (a_nan & ~b_nan) | tie
    return tl.where(pick_a, a, b), tl.where(pick_a, a_index, b_index)


@triton.jit
def add(a, b):
    return a + b


@triton.jit
def maximum(a, b):
    return tl.maximum(a, b)


@triton.jit
def minimum(a, b):
    return tl.minimum(a, b)
