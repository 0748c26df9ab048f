"""The op table: which aten ops the fuser lowers, as data.

Each entry is one aten op (one or more overloads that share semantics) and says
- which schema arguments are values (tensors or Python scalars) and how each is typed before use,
- how to render the op as a Triton expression over named operands (`render`, and `int_render`
  where integers or bools need other semantics),
- which schema arguments are attributes passed to the renderer as keywords,
- which operand dtypes it accepts (anything else runs eager, with the reason logged).

Adding a pointwise op is one `_op(...)` line here. Operands arrive as names of temporaries already
cast as their typing rule says, so a renderer never promotes. Views are in `VIEW_OPS`, and they move
indices rather than values (see `fuser.lower.views`); scatters (`SCATTER_OPS`) choose, per element, between
two inputs read at different indices; indexed ops (`INDEXED_OPS`: gather, scatter of a value) read or write
at positions a tensor of the kernel holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import torch

from fuser.lower.dtypes import HALF_DTYPES, arithmetic_dtype, is_integral, triton_name


class Typing(Enum):
    """How an operand is cast before the renderer sees it."""

    OUT = "out"  # to the dtype arithmetic producing the output dtype runs in
    COMMON = "common"  # to the promoted dtype of all COMMON operands (comparisons)
    BOOL = "bool"  # to bool (logical ops, where's condition, masks)
    OWN = "own"  # unchanged, only widened (casts, predicates such as isnan)


class Result(Enum):
    """The dtype of a rendered expression."""

    OUT = "out"  # the arithmetic dtype of the output (cast to the output dtype after)
    BOOL = "bool"
    OPERAND = "operand"  # the operand's own dtype: a cast, which rounds to the output dtype explicitly


class Accepts(Enum):
    """Operand dtypes an op is lowered for; others run eager."""

    ANY = "any"
    FLOATING = "floating"
    INTEGRAL = "integral"  # ints and bool
    NUMBERS = "numbers"  # every dtype but bool

    def admits(self, dtype: torch.dtype) -> bool:
        if self is Accepts.FLOATING:
            return dtype.is_floating_point
        if self is Accepts.INTEGRAL:
            return is_integral(dtype)
        if self is Accepts.NUMBERS:
            return dtype != torch.bool
        return True


@dataclass(frozen=True)
class PointwiseOp:
    name: str
    overloads: tuple[str, ...]
    operands: tuple[tuple[str, Typing], ...]
    render: Callable[..., str]
    int_render: Callable[..., str] | None = None
    attrs: tuple[str, ...] = ()
    result: Result = Result.OUT
    accepts: Accepts = Accepts.ANY
    # Operands that may be omitted (None) in the schema, e.g. clamp's min and max.
    optional: frozenset[str] = field(default_factory=frozenset)
    # The renderer also gets `out_dtype=` (nan_to_num's default bounds are the output dtype's limits).
    wants_out_dtype: bool = False
    # The renderer also gets `device=` ("cpu" or "cuda"): where ATen's CPU and CUDA kernels associate
    # the same arithmetic differently (addcmul), the kernel follows the device's.
    wants_device: bool = False

    def renderer_for(self, operand_dtypes: list[torch.dtype]) -> Callable[..., str]:
        if self.int_render is not None and all(is_integral(d) for d in operand_dtypes):
            return self.int_render
        return self.render


@dataclass(frozen=True)
class ViewOp:
    name: str
    overloads: tuple[str, ...]


@dataclass(frozen=True)
class ScatterOp:
    """An op each of whose elements is read from one of its inputs, chosen by position: `self` with a
    region replaced by `src` (the gradient of a slice), or inputs laid end to end (cat). It fuses like a
    pointwise op; `fuser.lower.views.scatter_pieces` says which input each element comes from, and where."""

    name: str
    overloads: tuple[str, ...]


@dataclass(frozen=True)
class IndexedOp:
    """An op that reads or writes along `dim` at positions another tensor holds: gather reads `self` there,
    scatter of a value writes the value there. The kernel loads those positions (`Builder.indexed`), so,
    unlike a view's, its index mapping depends on the data."""

    name: str
    overloads: tuple[str, ...]


def _libdevice(fn: str) -> Callable[[str], str]:
    return lambda x: f"libdevice.{fn}({x})"


def _lib(fn: str) -> Callable[..., str]:
    return lambda *xs: f"lib.{fn}({', '.join(xs)})"


NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"
UNARY = (("self", Typing.OUT),)
BINARY = (("self", Typing.OUT), ("other", Typing.OUT))
COMPARE = (("self", Typing.COMMON), ("other", Typing.COMMON))
LOGICAL = (("self", Typing.BOOL), ("other", Typing.BOOL))


def _py(value) -> str:
    """A Python literal for a number, inf and nan included."""
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return 'float("nan")' if value != value else ('float("inf")' if value > 0 else '-float("inf")')
    return repr(value)


# Renderers run while the backend compiles, under fake tensors: scalar arithmetic here uses NumPy.


def _at_precision(value: float, dtype: torch.dtype) -> float:
    """`value` as a float32 or float64 kernel holds it."""
    return float(np.float32(value)) if dtype == torch.float32 else float(value)


def _scalar(value, out_dtype: torch.dtype) -> str:
    """A Scalar attribute (alpha, value) as ATen converts it for the dtype it computes in:
    `value.to<opmath_t>()` — truncated for integers, nonzero-is-true for bools, fp32 for half types."""
    arithmetic = arithmetic_dtype(out_dtype)
    if out_dtype == torch.bool:
        converted = int(bool(value))
    elif out_dtype.is_floating_point:
        converted = float(value)
    else:
        info = torch.iinfo(out_dtype)  # truncate, then wrap into the dtype's range (uint8's -1 is 255)
        converted = (int(value) - info.min) % 2**info.bits + info.min
    return f"tl.full([], {_py(converted)}, {triton_name(arithmetic)})"


def _converted(value: str, out_dtype: torch.dtype) -> str:
    """A value of its own dtype converted as ATen's value.to<scalar_t>(): != 0 for a bool, truncation for
    an integer, rounding to a half dtype (a bfloat16 fill of 0.1 is 0.10009765625: the kernel goes on
    computing with that value, not float32's 0.1); held in the output's arithmetic dtype."""
    if out_dtype == torch.bool:
        return f"(({value}) != 0)"
    held = f"({value}).to({triton_name(arithmetic_dtype(out_dtype))})"
    return _half_scalar(held, out_dtype) if out_dtype in HALF_DTYPES else held


def _half_scalar(x: str, out_dtype: torch.dtype) -> str:
    """A float32 operand rounded to a half output dtype: eager (on CPU and CUDA) reads remainder's and
    fmod's Scalar divisor as the tensor's dtype (0.1 is 0.0999755859375 for float16). A half tensor
    operand is unchanged by the rounding."""
    if out_dtype == torch.float16:
        return f"({x}).to(tl.float16).to(tl.float32)"
    if out_dtype == torch.bfloat16:
        return f"lib.round_to_bf16({x})"
    return x


def _add_scaled(a: str, b: str, alpha=1, *, out_dtype: torch.dtype, sign: int = 1) -> str:
    """`a + sign * alpha * b`, as ATen's add kernel: floats use one fused multiply-add,
    `fmadd(b, alpha, a)`, so `-inf + 2 * max` is -inf rather than nan. libdevice's fma: written with tl.fma,
    the fuser's add with alpha=2 gave nan where eager's CUDA add did not (H100, Triton 3.6; a standalone
    tl.fma matched eager, so the cause is not established: docs/gpu-runs.md)."""
    if out_dtype.is_floating_point:
        return f"libdevice.fma({b}, {_scalar(sign * alpha, out_dtype)}, {a})"
    if alpha == 1 or out_dtype == torch.bool:  # bool: alpha is true or eager rejects it
        return f"{a} + {b}" if sign > 0 else f"{a} - {b}"
    return f"{a} + {b} * {_scalar(sign * alpha, out_dtype)}"


def _addcmul(x: str, a: str, b: str, value=1, *, out_dtype: torch.dtype, device: str) -> str:
    # ATen's CPU kernel: self + (value * tensor1) * tensor2, its last multiply and the add fused (so
    # -inf + max * 2 is -inf, not nan). Its CUDA kernel: self + value * (tensor1 * tensor2), fused
    # likewise; where value * tensor1 overflows and tensor1 * tensor2 does not (times 0), they differ.
    scalar = _scalar(value, out_dtype)
    if out_dtype.is_floating_point:
        if device == "cuda":
            return f"libdevice.fma({scalar}, {a} * {b}, {x})"
        return f"libdevice.fma(({scalar} * {a}), {b}, {x})"
    return f"{x} + ({scalar} * {a}) * {b}"  # integers wrap the same either way


def _threshold_bound(threshold: str, out_dtype: torch.dtype, device: str) -> str:
    # ATen's CPU threshold kernel compares a half tensor, widened, against the float32 bound; its CUDA
    # kernel first rounds the bound to the tensor's dtype. In bfloat16 0.1 rounds to 0.10009765625, which
    # passes a bound of 0.1 on CPU and not on CUDA.
    return _half_scalar(threshold, out_dtype) if device == "cuda" else threshold


def _threshold(x: str, threshold: str, value: str, *, out_dtype: torch.dtype, device: str) -> str:
    return f"tl.where({x} <= {_threshold_bound(threshold, out_dtype, device)}, {value}, {x})"


def _threshold_backward(grad: str, x: str, threshold: str, *, out_dtype: torch.dtype, device: str) -> str:
    return f"tl.where({x} <= {_threshold_bound(threshold, out_dtype, device)}, 0, {grad})"


def _addcdiv(x: str, a: str, b: str, value=1, *, out_dtype: torch.dtype) -> str:
    # ATen: self + value * tensor1 / tensor2, left to right.
    return f"{x} + ({_scalar(value, out_dtype)} * {a}) / {b}"


def _logit(x: str, eps=None, *, out_dtype: torch.dtype) -> str:
    if eps is None or eps < 0:  # ATen clamps only for eps >= 0
        return f"libdevice.log({x} / (1.0 - {x}))"
    # The bounds eps and 1 - eps at the arithmetic dtype's precision, as CUDA (eager on CPU rounds them
    # to a half tensor's dtype, where 1 - 1e-6 is 1 and logit(1) is inf).
    lo = _at_precision(eps, arithmetic_dtype(out_dtype))
    hi = _at_precision(1.0 - lo, arithmetic_dtype(out_dtype))
    lo, hi = _py(lo), _py(hi)
    clamped = f"tl.where({x} < {lo}, {lo}, tl.where({x} > {hi}, {hi}, {x}))"  # nan stays nan
    return f"libdevice.log({clamped} / (1.0 - {clamped}))"


def _pow_scalar_exponent(a: str, e: str) -> str:
    """pow.Tensor_Scalar as ATen's kernels: an exponent of 0.5, -0.5 and -1 is sqrt, rsqrt and reciprocal
    (so pow(-inf, 0.5) is nan, not C's +inf), and 2, 3 and -2 are products. (Eager on CPU calls pow for
    float16 instead; CUDA specializes float16 too.)"""
    one = f"tl.full([], 1.0, ({a}).dtype)"
    products = (
        f"tl.where({e} == 2.0, {a} * {a}, tl.where({e} == 3.0, {a} * {a} * {a}, "
        f"tl.where({e} == -2.0, libdevice.div_rn({one}, {a} * {a}), libdevice.pow({a}, {e}))))"
    )
    return (
        f"tl.where({e} == 0.5, libdevice.sqrt({a}), tl.where({e} == -0.5, libdevice.rsqrt({a}), "
        f"tl.where({e} == -1.0, libdevice.div_rn({one}, {a}), {products})))"
    )


def _nextafter(a: str, b: str, *, out_dtype: torch.dtype) -> str:
    # Half types step to the neighbouring half value, which fp32 arithmetic cannot see.
    if out_dtype == torch.float16:
        return f"lib.nextafter_fp16({a}, {b})"
    if out_dtype == torch.bfloat16:
        return f"lib.nextafter_bf16({a}, {b})"
    return f"libdevice.nextafter({a}, {b})"


def _cast(x: str, *, out_dtype: torch.dtype) -> str:
    """A cast to `out_dtype` (the codegen rounds the returned value to it).

    ATen converts to a half type through float32 (c10::Half and c10::BFloat16 are built from a float),
    so float64 and int64 values round twice; going through float32 here does the same.
    """
    if out_dtype in HALF_DTYPES:
        return f"({x}).to(tl.float32)"
    return x


def _clamp(x: str, lo: str | None, hi: str | None) -> str:
    # ATen's clamp propagates nan from the input and from the bounds.
    if lo is not None:
        x = f"tl.maximum({x}, {lo}, {NAN_ALL})"
    if hi is not None:
        x = f"tl.minimum({x}, {hi}, {NAN_ALL})"
    return x


def _int_clamp(x: str, lo: str | None, hi: str | None) -> str:
    if lo is not None:
        x = f"tl.maximum({x}, {lo})"
    if hi is not None:
        x = f"tl.minimum({x}, {hi})"
    return x


_SQRT_2_OVER_PI = 0.7978845608028654
# tanh-gelu's sigmoid form as one polynomial in exp2's argument: -2 sqrt(2/pi) log2(e), and that times 0.044715.
_GELU_C0 = -2.0 * _SQRT_2_OVER_PI * 1.4426950408889634
_GELU_C1 = _GELU_C0 * 0.044715


def _gelu(
    x: str, approximate: str = "none", out_dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> str:
    if approximate == "tanh":
        # x / (1 + exp(-2u)) is 0.5 x (1 + tanh(u)) without its cancellation where tanh(u) nears -1 (eager's
        # form is 424 float32 ulps from float64 there, this one about 7). In float32, exp2 of one polynomial
        # and a fast division: a reciprocal and a multiply, which gives 0 where the divisor passes 2^126
        # (x below about -44.6, where eager's result is 0 too). On a GPU both are single instructions
        # (lib.exp2_ftz, lib.rcp_ftz): 19.5 instructions an element for sm_90 where the plain form took 27.4,
        # and bf16 16384x4096 takes as long as a plain add on an H200 (tools/probes/gelu_tanh_forms_cuda.py).
        if out_dtype == torch.float64:
            inner = f"{_SQRT_2_OVER_PI!r} * ({x} + 0.044715 * {x} * {x} * {x})"
            return f"{x} / (1.0 + tl.exp(-2.0 * {inner}))"
        exponent = f"{x} * ({_GELU_C0!r} + {_GELU_C1!r} * ({x} * {x}))"
        if device == "cuda":
            return f"{x} * lib.rcp_ftz(1.0 + lib.exp2_ftz({exponent}))"
        return f"libdevice.fast_dividef({x}, 1.0 + libdevice.exp2({exponent}))"
    # erfc(-x / sqrt 2), not 1 + erf(x / sqrt 2): the sum cancels for x < -5.4 (float32)
    return f"0.5 * {x} * libdevice.erfc({x} * -0.7071067811865476)"


def _div_mode(a: str, b: str, rounding_mode: str | None = None) -> str:
    # div_rn: Triton's float32 `/` is approximate on a GPU (a quotient one ulp under an integer truncates
    # one lower). Half quotients are truncated at float32 precision, as eager's scalar loops.
    if rounding_mode == "trunc":
        return f"libdevice.trunc(libdevice.div_rn({a}, {b}))"
    if rounding_mode == "floor":
        return f"lib.floor_divide_float({a}, {b})"
    return f"libdevice.div_rn({a}, {b})"


def _int_div_mode(a: str, b: str, rounding_mode: str | None = None) -> str:
    # rounding_mode=None on integers promotes to float in eager, so only trunc and floor reach here.
    return f"{a} // {b}" if rounding_mode == "trunc" else f"lib.floor_divide_int({a}, {b})"


def _nan_to_num(x: str, nan=None, posinf=None, neginf=None, *, out_dtype: torch.dtype) -> str:
    big = torch.finfo(out_dtype).max
    nan = 0.0 if nan is None else nan
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    return (
        f"tl.where({x} != {x}, {float(nan)!r}, tl.where({x} == float('inf'), {float(posinf)!r}, "
        f"tl.where({x} == -float('inf'), {float(neginf)!r}, {x})))"
    )


def _op(name: str, overloads: str, operands, render, **kw) -> PointwiseOp:
    """`overloads` are space-separated; a bare overload name belongs to the packet called `name`."""
    qualified = tuple(o if "." in o else f"{name}.{o}" for o in overloads.split())
    return PointwiseOp(name=name, overloads=qualified, operands=operands, render=render, **kw)


def _unary_float(name: str) -> PointwiseOp:
    return _op(name, "default", UNARY, _libdevice(name))


POINTWISE_OPS: tuple[PointwiseOp, ...] = (
    # --- unary math: integer inputs promote to float through the OUT typing ---
    *(
        _unary_float(n)
        for n in [
            "exp",
            "exp2",
            "expm1",
            "log",
            "log2",
            "log10",
            "log1p",
            "sqrt",
            "rsqrt",
            "sin",
            "cos",
            "tan",
            "asin",
            "acos",
            "atan",
            "sinh",
            "cosh",
            "tanh",
            "asinh",
            "acosh",
            "atanh",
            "erf",
            "erfc",
            "erfinv",
            "lgamma",
        ]
    ),
    # Modified Bessel functions of the first kind (Kaiser windows, von Mises distributions): libdevice's.
    _op("i0", "default", UNARY, _libdevice("cyl_bessel_i0")),
    _op("special_i1", "default", UNARY, _libdevice("cyl_bessel_i1")),
    _op("special_i0e", "default", UNARY, _lib("i0e")),
    _op("abs", "default", UNARY, lambda x: f"tl.abs({x})"),
    _op("neg", "default", UNARY, _lib("neg")),
    _op("reciprocal", "default", UNARY, lambda x: f"1.0 / {x}"),
    # Activations use Triton's fast exp (a few ulp, as Inductor's): they sit in memory-bound chains where
    # libdevice's precise exp costs measurable time; `exp` itself stays precise.
    _op("sigmoid", "default", UNARY, lambda x: f"1.0 / (1.0 + tl.exp(-{x}))"),
    _op("square", "default", UNARY, lambda x: f"{x} * {x}"),
    _op("floor", "default", UNARY, _libdevice("floor"), int_render=lambda x: x),
    _op("ceil", "default", UNARY, _libdevice("ceil"), int_render=lambda x: x),
    _op("trunc", "default", UNARY, _libdevice("trunc"), int_render=lambda x: x),
    _op("round", "default", UNARY, _libdevice("nearbyint"), int_render=lambda x: x),
    _op("frac", "default", UNARY, lambda x: f"{x} - libdevice.trunc({x})", accepts=Accepts.FLOATING),
    _op("sign", "default", UNARY, _lib("sign_float"), int_render=_lib("sign_int")),
    _op("sgn", "default", UNARY, _lib("sign_float"), int_render=_lib("sign_int")),
    # The operand keeps its dtype: ~ of a bool is logical not (as int32, ~1 would be -2, still true).
    _op("bitwise_not", "default", (("self", Typing.OWN),), lambda x: f"~{x}", accepts=Accepts.INTEGRAL),
    _op("logical_not", "default", (("self", Typing.OWN),), lambda x: f"{x} == 0", result=Result.BOOL),
    # --- activations ---
    _op("relu", "default", UNARY, lambda x: f"tl.where({x} < 0, 0, {x})"),
    _op(
        "gelu",
        "default",
        UNARY,
        _gelu,
        attrs=("approximate",),
        accepts=Accepts.FLOATING,
        wants_out_dtype=True,
        wants_device=True,
    ),
    _op("silu", "default", UNARY, lambda x: f"{x} / (1.0 + tl.exp(-{x}))", accepts=Accepts.FLOATING),
    _op(
        "mish",
        "default",
        UNARY,
        lambda x: f"{x} * libdevice.tanh(tl.where({x} > 20.0, {x}, libdevice.log1p(libdevice.exp({x}))))",
        accepts=Accepts.FLOATING,
    ),
    _op(
        "softplus",
        "default",
        UNARY,
        lambda x, beta, threshold: (
            f"tl.where({x} * {beta!r} > {threshold!r}, {x}, "
            f"libdevice.log1p(libdevice.exp({x} * {beta!r})) / {beta!r})"
        ),
        attrs=("beta", "threshold"),
        accepts=Accepts.FLOATING,
    ),
    _op(
        "elu",
        "default",
        UNARY,
        lambda x, alpha, scale, input_scale: (
            f"tl.where({x} > 0, {x} * {scale!r}, libdevice.expm1({x} * {input_scale!r}) * {alpha * scale!r})"
        ),
        attrs=("alpha", "scale", "input_scale"),
        accepts=Accepts.FLOATING,
    ),
    _op(
        "leaky_relu",
        "default",
        UNARY,
        lambda x, negative_slope: f"tl.where({x} > 0, {x}, {x} * {negative_slope!r})",
        attrs=("negative_slope",),
        accepts=Accepts.FLOATING,
    ),
    _op(
        "hardtanh",
        "default",
        UNARY,
        lambda x, min_val, max_val: _clamp(x, repr(float(min_val)), repr(float(max_val))),
        attrs=("min_val", "max_val"),
        accepts=Accepts.FLOATING,
    ),
    _op(
        "hardsigmoid",
        "default",
        UNARY,
        lambda x: f"{_clamp(f'{x} + 3.0', '0.0', '6.0')} / 6.0",
        accepts=Accepts.FLOATING,
    ),
    _op(
        "hardswish",
        "default",
        UNARY,
        lambda x: f"{x} * {_clamp(f'{x} + 3.0', '0.0', '6.0')} / 6.0",
        accepts=Accepts.FLOATING,
    ),
    _op(
        "threshold",
        "default",
        (("self", Typing.OUT), ("threshold", Typing.OUT), ("value", Typing.OUT)),
        _threshold,
        wants_out_dtype=True,
        wants_device=True,
    ),
    _op(
        "threshold_backward",
        "default",
        (("grad_output", Typing.OUT), ("self", Typing.OUT), ("threshold", Typing.OUT)),
        _threshold_backward,
        wants_out_dtype=True,
        wants_device=True,
    ),
    _op(
        "logit",
        "default",
        UNARY,
        _logit,
        attrs=("eps",),
        accepts=Accepts.FLOATING,
        wants_out_dtype=True,
    ),
    # --- predicates ---
    _op("isnan", "default", (("self", Typing.OWN),), lambda x: f"{x} != {x}", result=Result.BOOL),
    _op(
        "isinf",
        "default",
        (("self", Typing.OWN),),
        lambda x: f"tl.abs({x}) == float('inf')",
        int_render=lambda x: f"{x} != {x}",
        result=Result.BOOL,
    ),
    _op(
        "isfinite",
        "default",
        (("self", Typing.OWN),),
        lambda x: f"({x} == {x}) & (tl.abs({x}) != float('inf'))",
        int_render=lambda x: f"{x} == {x}",
        result=Result.BOOL,
    ),
    _op(
        "isposinf",
        "default",
        (("self", Typing.OWN),),
        lambda x: f"{x} == float('inf')",
        int_render=lambda x: f"{x} != {x}",
        result=Result.BOOL,
    ),
    _op(
        "isneginf",
        "default",
        (("self", Typing.OWN),),
        lambda x: f"{x} == -float('inf')",
        int_render=lambda x: f"{x} != {x}",
        result=Result.BOOL,
    ),
    _op(
        "signbit",
        "default",
        (("self", Typing.OWN),),
        _lib("signbit"),
        int_render=lambda x: f"{x} < 0",
        result=Result.BOOL,
    ),
    # --- binary arithmetic ---
    # A Scalar operand is used at the arithmetic dtype's precision (eager on CPU rounds add's, sub's,
    # rsub's and pow's Scalar to a half tensor's dtype first; CUDA does not).
    _op("add", "Tensor Scalar", BINARY, _add_scaled, attrs=("alpha",), wants_out_dtype=True),
    _op(
        "sub",
        "Tensor Scalar",
        BINARY,
        lambda a, b, alpha=1, *, out_dtype: _add_scaled(a, b, alpha, out_dtype=out_dtype, sign=-1),
        attrs=("alpha",),
        wants_out_dtype=True,
    ),
    _op(
        "rsub",
        "Tensor Scalar",
        BINARY,
        lambda a, b, alpha=1, *, out_dtype: _add_scaled(b, a, alpha, out_dtype=out_dtype, sign=-1),
        attrs=("alpha",),
        wants_out_dtype=True,
    ),
    # prims.div (from decompositions) divides floats truly, rounded as `div` is, and truncates integers.
    # Of two bools eager returns float32 where its meta says bool (1.5 + 0/0: eager nan, Inductor 2.5):
    # no kernel can match both, so bools stay eager, converted to the traced bool as the graph expects.
    _op(
        "prims_div",
        "prims::div.default",
        BINARY,
        lambda a, b: f"libdevice.div_rn({a}, {b})",
        int_render=lambda a, b: f"{a} // {b}",
        accepts=Accepts.NUMBERS,
    ),
    _op("mul", "Tensor Scalar", BINARY, lambda a, b: f"{a} * {b}"),
    # Division rounds correctly (div_rn), as eager's does: Triton's float32 `/` is approximate on a GPU.
    _op("div", "Tensor Scalar", BINARY, lambda a, b: f"libdevice.div_rn({a}, {b})"),
    _op(
        "div_mode",
        "div.Tensor_mode div.Scalar_mode",
        BINARY,
        _div_mode,
        int_render=_int_div_mode,
        attrs=("rounding_mode",),
    ),
    _op(
        "floor_divide",
        "default Scalar",
        BINARY,
        _lib("floor_divide_float"),
        int_render=_lib("floor_divide_int"),
    ),
    _op(
        "remainder",
        "Tensor Scalar",
        BINARY,
        lambda a, b, *, out_dtype: f"lib.remainder_float({a}, {_half_scalar(b, out_dtype)})",
        int_render=lambda a, b, *, out_dtype: f"lib.remainder_int({a}, {b})",
        wants_out_dtype=True,
    ),
    _op(
        "fmod",
        "Tensor Scalar",
        BINARY,
        lambda a, b, *, out_dtype: f"libdevice.fmod({a}, {_half_scalar(b, out_dtype)})",
        int_render=lambda a, b, *, out_dtype: f"{a} % {b}",
        wants_out_dtype=True,
    ),
    # The schema calls the second operand `exponent`, not `other`. Integers use exponentiation by
    # squaring, wrapping as ATen's powi does.
    _op(
        "pow",
        "Tensor_Tensor Scalar",
        (("self", Typing.OUT), ("exponent", Typing.OUT)),
        lambda a, b: f"libdevice.pow({a}, {b})",
        int_render=_lib("pow_int"),
    ),
    _op(
        "pow",
        "Tensor_Scalar",
        (("self", Typing.OUT), ("exponent", Typing.OUT)),
        _pow_scalar_exponent,
        int_render=_lib("pow_int"),
    ),
    _op(
        "maximum",
        "default",
        BINARY,
        lambda a, b: f"tl.maximum({a}, {b}, {NAN_ALL})",
        int_render=lambda a, b: f"tl.maximum({a}, {b})",
    ),
    _op(
        "minimum",
        "default",
        BINARY,
        lambda a, b: f"tl.minimum({a}, {b}, {NAN_ALL})",
        int_render=lambda a, b: f"tl.minimum({a}, {b})",
    ),
    # fmax / fmin ignore a nan operand: pick the other one explicitly (Triton leaves the choice open).
    _op(
        "fmax",
        "default",
        BINARY,
        lambda a, b: f"tl.where({a} != {a}, {b}, tl.where({b} != {b}, {a}, tl.maximum({a}, {b})))",
        int_render=lambda a, b: f"tl.maximum({a}, {b})",
    ),
    _op(
        "fmin",
        "default",
        BINARY,
        lambda a, b: f"tl.where({a} != {a}, {b}, tl.where({b} != {b}, {a}, tl.minimum({a}, {b})))",
        int_render=lambda a, b: f"tl.minimum({a}, {b})",
    ),
    _op("atan2", "default", BINARY, _lib("atan2"), accepts=Accepts.FLOATING),
    _op("hypot", "default", BINARY, lambda a, b: f"libdevice.hypot({a}, {b})", accepts=Accepts.FLOATING),
    _op(
        "copysign",
        "Tensor Scalar",
        BINARY,
        lambda a, b: f"libdevice.copysign({a}, {b})",
        accepts=Accepts.FLOATING,
    ),
    _op("nextafter", "default", BINARY, _nextafter, accepts=Accepts.FLOATING, wants_out_dtype=True),
    _op("logaddexp", "default", BINARY, _lib("logaddexp"), accepts=Accepts.FLOATING),
    _op("xlogy", "Tensor Scalar_Other", BINARY, _lib("xlogy"), accepts=Accepts.FLOATING),
    # --- comparisons: operands promote together, the result is bool ---
    *(
        _op(name, "Tensor Scalar", COMPARE, lambda a, b, s=symbol: f"{a} {s} {b}", result=Result.BOOL)
        for name, symbol in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))
    ),
    # --- logical and bitwise ---
    # Not & | ^: Triton's interpreter cannot combine a bool block with a 0-d operand's comparison
    # (its splat turns the comparison into float32), and where / != mean the same on a GPU.
    _op("logical_and", "default", LOGICAL, lambda a, b: f"tl.where({a}, {b}, False)", result=Result.BOOL),
    _op("logical_or", "default", LOGICAL, lambda a, b: f"tl.where({a}, True, {b})", result=Result.BOOL),
    _op("logical_xor", "default", LOGICAL, lambda a, b: f"{a} != {b}", result=Result.BOOL),
    _op("bitwise_and", "Tensor Scalar", BINARY, lambda a, b: f"{a} & {b}", accepts=Accepts.INTEGRAL),
    _op("bitwise_or", "Tensor Scalar", BINARY, lambda a, b: f"{a} | {b}", accepts=Accepts.INTEGRAL),
    _op("bitwise_xor", "Tensor Scalar", BINARY, lambda a, b: f"{a} ^ {b}", accepts=Accepts.INTEGRAL),
    # --- ternaries ---
    _op(
        "where",
        "self",
        (("condition", Typing.BOOL), ("self", Typing.OUT), ("other", Typing.OUT)),
        lambda c, a, b: f"tl.where({c}, {a}, {b})",
    ),
    _op(
        "masked_fill",
        "Scalar Tensor",
        # The value keeps its own dtype and converts as ATen's value.to<scalar_t>() does: to a bool by
        # != 0 (0.5 fills True), to an integer by truncation. (OUT typing would cast 0.5 to int32 0 for a
        # bool tensor, which computes in int32.)
        (("self", Typing.OUT), ("mask", Typing.BOOL), ("value", Typing.OWN)),
        lambda x, m, v, *, out_dtype: f"tl.where({m}, {_converted(v, out_dtype)}, {x})",
        wants_out_dtype=True,
    ),
    _op(
        "clamp",
        "default Tensor",
        (("self", Typing.OUT), ("min", Typing.OUT), ("max", Typing.OUT)),
        _clamp,
        int_render=_int_clamp,
        optional=frozenset({"min", "max"}),
    ),
    _op(
        "clamp_min",
        "default Tensor",
        (("self", Typing.OUT), ("min", Typing.OUT)),
        lambda x, lo: _clamp(x, lo, None),
        int_render=lambda x, lo: _int_clamp(x, lo, None),
    ),
    _op(
        "clamp_max",
        "default Tensor",
        (("self", Typing.OUT), ("max", Typing.OUT)),
        lambda x, hi: _clamp(x, None, hi),
        int_render=lambda x, hi: _int_clamp(x, None, hi),
    ),
    _op(
        "lerp",
        "Scalar Tensor",
        (("self", Typing.OUT), ("end", Typing.OUT), ("weight", Typing.OUT)),
        # ATen's two-sided form keeps lerp exact at weight 0 and 1; both sides are fused multiply-adds.
        lambda a, b, w: (
            f"tl.where(tl.abs({w}) < 0.5, libdevice.fma({w}, {b} - {a}, {a}), "
            f"libdevice.fma({a} - {b}, 1.0 - {w}, {b}))"
        ),
        accepts=Accepts.FLOATING,
    ),
    _op(
        "addcmul",
        "default",
        (("self", Typing.OUT), ("tensor1", Typing.OUT), ("tensor2", Typing.OUT)),
        _addcmul,
        attrs=("value",),
        wants_out_dtype=True,
        wants_device=True,
    ),
    _op(
        "addcdiv",
        "default",
        (("self", Typing.OUT), ("tensor1", Typing.OUT), ("tensor2", Typing.OUT)),
        _addcdiv,
        attrs=("value",),
        accepts=Accepts.FLOATING,
        wants_out_dtype=True,
    ),
    # full_like reads nothing of its input: the value is the fill (isfinite on integers decomposes to it).
    # The fill keeps its own dtype and converts as masked_fill's value does. full (what zeros, ones and
    # the zeros of a slice's gradient decompose to) and scalar_tensor (a 0-d one: eight a step in each
    # zoo model's graphs) are the same value with no input at all.
    *(
        _op(name, "default", ((value, Typing.OWN),), _converted, wants_out_dtype=True)
        for name, value in (("full_like", "fill_value"), ("full", "fill_value"), ("scalar_tensor", "s"))
    ),
    # --- copies and casts: the value keeps its own dtype; fuser.emit.codegen casts it to the output dtype ---
    _op("clone", "default", (("self", Typing.OWN),), lambda x: x, result=Result.OPERAND),
    _op("_to_copy", "default", (("self", Typing.OWN),), _cast, result=Result.OPERAND, wants_out_dtype=True),
    _op("lift_fresh_copy", "default", (("self", Typing.OWN),), lambda x: x, result=Result.OPERAND),
    _op(
        "convert_element_type",
        "prims::convert_element_type.default",
        (("a", Typing.OWN),),
        _cast,
        result=Result.OPERAND,
        wants_out_dtype=True,
    ),
    _op(
        "nan_to_num",
        "default",
        UNARY,
        _nan_to_num,
        int_render=lambda x, nan=None, posinf=None, neginf=None, out_dtype=None: x,
        attrs=("nan", "posinf", "neginf"),
        wants_out_dtype=True,
    ),
)

# The ops whose CPU kernel takes a 0-dim second operand ("other") at its own value, in float32, where the
# result is a half dtype (`iter.original_scalar_value`: a "CPU scalar"); elsewhere a 0-dim operand of another
# dtype is rounded to the half dtype first. Measured on torch 2.13's CPU kernels (docs/fuzz.md): mul and
# div (session 36), div with a rounding mode and floor_divide (session 37, found by the conformance suite's
# unheld 0-d sample) take it at its value; every other binary op probed rounds it (tools/probes/cpu_scalar_other.py).
CPU_SCALAR_OTHER = frozenset({"mul", "div", "div_mode", "floor_divide"})

VIEW_OPS: tuple[ViewOp, ...] = (
    ViewOp("view", ("view.default", "_unsafe_view.default", "reshape.default")),
    ViewOp("permute", ("permute.default",)),
    ViewOp("transpose", ("transpose.int",)),
    ViewOp("t", ("t.default",)),
    ViewOp("expand", ("expand.default",)),
    ViewOp("unsqueeze", ("unsqueeze.default",)),
    ViewOp("squeeze", ("squeeze.default", "squeeze.dim", "squeeze.dims")),
    ViewOp("slice", ("slice.Tensor",)),
    ViewOp("select", ("select.int",)),
    ViewOp("alias", ("alias.default",)),
    ViewOp("broadcast_in_dim", ("prims::broadcast_in_dim.default",)),
)


SCATTER_OPS: tuple[ScatterOp, ...] = (
    ScatterOp("slice_scatter", ("slice_scatter.default",)),
    ScatterOp("cat", ("cat.default",)),
)

INDEXED_OPS: tuple[IndexedOp, ...] = (
    IndexedOp("gather", ("gather.default",)),
    IndexedOp("scatter_value", ("scatter.value",)),
)


def _overload(qualified: str) -> torch._ops.OpOverload:
    namespace, _, rest = qualified.rpartition("::") if "::" in qualified else ("aten", "", qualified)
    packet, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def _by_overload(ops) -> dict:
    return {_overload(o): op for op in ops for o in op.overloads}


POINTWISE_BY_OVERLOAD = _by_overload(POINTWISE_OPS)


def _is_bool(arg) -> bool:
    return arg is torch.bool or isinstance(arg, bool)


def _alpha_rejected(args: dict, out_dtype: torch.dtype) -> str | None:
    """ATen's alpha_check for add, sub and rsub."""
    alpha = args.get("alpha", 1)
    if isinstance(alpha, bool) and out_dtype != torch.bool:
        return "eager rejects a bool alpha for a non-bool result"
    if isinstance(alpha, float) and not out_dtype.is_floating_point:
        return "eager rejects a float alpha for an integer or bool result"
    return None


def _subtraction_rejected(args: dict, out_dtype: torch.dtype) -> str | None:
    """ATen's sub_check (no bool operand, tensor or scalar), then alpha_check."""
    if _is_bool(args["self"]) or _is_bool(args["other"]):
        return "eager rejects subtraction with a bool operand"
    return _alpha_rejected(args, out_dtype)


def overflows(value, dtype: torch.dtype) -> bool:
    """Whether c10's checked conversion of a Scalar to `dtype` (c10::overflows) rejects `value`: out of the
    dtype's range, where a float's inf and nan convert to a float dtype, nan to no integer one, and a
    negative integer wraps into an unsigned one unless its magnitude exceeds the maximum."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or dtype == torch.bool:
        return False
    if dtype.is_floating_point:
        return math.isfinite(value) and abs(value) > torch.finfo(dtype).max
    if math.isnan(value):
        return True
    info = torch.iinfo(dtype)
    if info.min == 0 and isinstance(value, int) and value < 0:
        return -value > info.max
    return not info.min <= value <= info.max


def _scalars_fit(*names: str) -> Callable[[dict, torch.dtype], str | None]:
    """The check of ops whose kernels convert Scalar arguments to the result dtype with c10's checked
    conversion (threshold's threshold and value, a fill, addcmul's value, clamp's bounds)."""

    def check(args: dict, out_dtype: torch.dtype) -> str | None:
        for name in names:
            if overflows(args.get(name), out_dtype):
                return f"eager rejects {name}={args[name]!r}: out of {out_dtype}'s range"
        return None

    return check


def _integer_power_rejected(args: dict, out_dtype: torch.dtype) -> str | None:
    """ATen's pow: an integer tensor to a negative integer Scalar power is an error."""
    exponent = args.get("exponent")
    if (
        is_integral(out_dtype)
        and isinstance(exponent, int)
        and not isinstance(exponent, bool)
        and exponent < 0
    ):
        return "eager rejects integers to negative integer powers"
    return None


# Checks eager's kernels run and their meta functions do not, so tracing accepts a call eager raises on:
# given the bound arguments (a tensor as its dtype, a number as itself) and the output dtype, why eager
# raises, or None.
# Such a call runs eagerly and raises as eager does, where a kernel would return a value. They only move
# calls eager rejects out of kernels, emitting nothing, so they are not part of an op's fingerprint; the
# conformance full tier checks that a compiled program raises where eager does.
EAGER_CHECKS: dict[str, Callable[[dict, torch.dtype], str | None]] = {
    "add": _alpha_rejected,
    "sub": _subtraction_rejected,
    "rsub": _subtraction_rejected,
    "threshold": _scalars_fit("threshold", "value"),
    "masked_fill": _scalars_fit("value"),  # a Scalar value; a 0-d tensor's is HOST_READ's
    "full_like": _scalars_fit("fill_value"),
    "full": _scalars_fit("fill_value"),
    "scalar_tensor": _scalars_fit("s"),
    "addcmul": _scalars_fit("value"),
    "clamp": _scalars_fit("min", "max"),
    "pow": _integer_power_rejected,
}

# Operands eager reads on the host (a 0-d tensor's item()) and converts to the result dtype with c10's
# checked conversion. A kernel sees such a value only as it runs, so the step checks it before each launch
# (`fuser.runtime.step`) where its dtype holds values the result's does not (`may_overflow`).
HOST_READ: dict[str, tuple[str, ...]] = {"masked_fill": ("value",)}


def may_overflow(source: torch.dtype, target: torch.dtype) -> bool:
    """Whether some value of dtype `source` is one c10's checked conversion to `target` rejects: its
    extremes, and a float's nan, are checked (the rule is monotone in magnitude)."""
    if source == torch.bool:
        return False
    if source.is_floating_point:
        extremes = (torch.finfo(source).max, -torch.finfo(source).max, math.nan)
    else:
        extremes = (torch.iinfo(source).min, torch.iinfo(source).max)
    return any(overflows(value, target) for value in extremes)


VIEW_BY_OVERLOAD = _by_overload(VIEW_OPS)
SCATTER_BY_OVERLOAD = _by_overload(SCATTER_OPS)
INDEXED_BY_OVERLOAD = _by_overload(INDEXED_OPS)
