"""The op table: which aten ops the fuser lowers, as data.

Each entry is one aten op (one or more overloads that share semantics) and says
- which schema arguments are values (tensors or Python scalars) and how each is typed before use,
- how to render the op as a Triton expression over named operands (`render`, and `int_render`
  where integers or bools need other semantics),
- which schema arguments are attributes passed to the renderer as keywords,
- which operand dtypes it accepts (anything else runs eager, with the reason logged).

Adding a pointwise op is one `_op(...)` line here. Operands arrive as names of temporaries already
cast as their typing rule says, so a renderer never promotes. Views are in `VIEW_OPS`, and they move
indices rather than values (see `fuser.views`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import torch

from fuser.dtypes import is_integral


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

    def renderer_for(self, operand_dtypes: list[torch.dtype]) -> Callable[..., str]:
        if self.int_render is not None and all(is_integral(d) for d in operand_dtypes):
            return self.int_render
        return self.render


@dataclass(frozen=True)
class ViewOp:
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


def _scaled(alpha, x: str) -> str:
    return x if alpha in (None, 1) else f"{x} * {alpha!r}"


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


def _gelu(x: str, approximate: str = "none") -> str:
    if approximate == "tanh":
        inner = f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})"
        return f"0.5 * {x} * (1.0 + libdevice.tanh({inner}))"
    return f"0.5 * {x} * (1.0 + libdevice.erf({x} * 0.7071067811865476))"


def _div_mode(a: str, b: str, rounding_mode: str | None = None) -> str:
    if rounding_mode == "trunc":
        return f"libdevice.trunc({a} / {b})"
    if rounding_mode == "floor":
        return f"lib.floor_divide_float({a}, {b})"
    return f"{a} / {b}"


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
        for n in (
            "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh "
            "asinh acosh atanh erf erfc erfinv lgamma"
        ).split()
    ),
    _op("abs", "default", UNARY, lambda x: f"libdevice.fabs({x})", int_render=lambda x: f"tl.abs({x})"),
    _op("neg", "default", UNARY, lambda x: f"-{x}"),
    _op("reciprocal", "default", UNARY, lambda x: f"1.0 / {x}"),
    _op("sigmoid", "default", UNARY, lambda x: f"1.0 / (1.0 + libdevice.exp(-{x}))"),
    _op("square", "default", UNARY, lambda x: f"{x} * {x}"),
    _op("floor", "default", UNARY, _libdevice("floor"), int_render=lambda x: x),
    _op("ceil", "default", UNARY, _libdevice("ceil"), int_render=lambda x: x),
    _op("trunc", "default", UNARY, _libdevice("trunc"), int_render=lambda x: x),
    _op("round", "default", UNARY, _libdevice("nearbyint"), int_render=lambda x: x),
    _op("frac", "default", UNARY, lambda x: f"{x} - libdevice.trunc({x})", accepts=Accepts.FLOATING),
    _op("sign", "default", UNARY, _lib("sign_float"), int_render=_lib("sign_int")),
    _op("sgn", "default", UNARY, _lib("sign_float"), int_render=_lib("sign_int")),
    _op("bitwise_not", "default", UNARY, lambda x: f"~{x}", accepts=Accepts.INTEGRAL),
    _op("logical_not", "default", (("self", Typing.OWN),), lambda x: f"{x} == 0", result=Result.BOOL),
    # --- activations ---
    _op("relu", "default", UNARY, lambda x: f"tl.where({x} < 0, 0, {x})"),
    _op("gelu", "default", UNARY, _gelu, attrs=("approximate",), accepts=Accepts.FLOATING),
    _op("silu", "default", UNARY, lambda x: f"{x} / (1.0 + libdevice.exp(-{x}))", accepts=Accepts.FLOATING),
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
        lambda x, t, v: f"tl.where({x} <= {t}, {v}, {x})",
    ),
    _op(
        "logit",
        "default",
        UNARY,
        lambda x, eps=None: (
            f"libdevice.log({x} / (1.0 - {x}))"
            if eps is None
            else f"libdevice.log({_clamp(x, repr(eps), repr(1 - eps))} / (1.0 - {_clamp(x, repr(eps), repr(1 - eps))}))"
        ),
        attrs=("eps",),
        accepts=Accepts.FLOATING,
    ),
    # --- predicates ---
    _op("isnan", "default", (("self", Typing.OWN),), lambda x: f"{x} != {x}", result=Result.BOOL),
    _op(
        "isinf",
        "default",
        (("self", Typing.OWN),),
        lambda x: f"libdevice.fabs({x}) == float('inf')",
        int_render=lambda x: f"{x} != {x}",
        result=Result.BOOL,
    ),
    _op(
        "isfinite",
        "default",
        (("self", Typing.OWN),),
        lambda x: f"({x} == {x}) & (libdevice.fabs({x}) != float('inf'))",
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
    _op("add", "Tensor Scalar", BINARY, lambda a, b, alpha=1: f"{a} + {_scaled(alpha, b)}", attrs=("alpha",)),
    _op("sub", "Tensor Scalar", BINARY, lambda a, b, alpha=1: f"{a} - {_scaled(alpha, b)}", attrs=("alpha",)),
    _op(
        "rsub", "Tensor Scalar", BINARY, lambda a, b, alpha=1: f"{b} - {_scaled(alpha, a)}", attrs=("alpha",)
    ),
    _op("mul", "Tensor Scalar", BINARY, lambda a, b: f"{a} * {b}"),
    _op("div", "Tensor Scalar", BINARY, lambda a, b: f"{a} / {b}"),
    _op(
        "div_mode",
        "div.Tensor_mode div.Scalar_mode",
        BINARY,
        _div_mode,
        int_render=_int_div_mode,
        attrs=("rounding_mode",),
    ),
    _op("floor_divide", "default Scalar", BINARY, _lib("floor_divide_float"), int_render=_lib("floor_divide_int")),
    _op(
        "remainder", "Tensor Scalar", BINARY, _lib("remainder_float"), int_render=_lib("remainder_int")
    ),
    _op(
        "fmod",
        "Tensor Scalar",
        BINARY,
        lambda a, b: f"libdevice.fmod({a}, {b})",
        int_render=lambda a, b: f"{a} % {b}",
    ),
    _op(
        "pow",
        "Tensor_Tensor Tensor_Scalar Scalar",
        BINARY,
        lambda a, b: f"libdevice.pow({a}, {b})",
        accepts=Accepts.FLOATING,
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
    _op("atan2", "default", BINARY, lambda a, b: f"libdevice.atan2({a}, {b})", accepts=Accepts.FLOATING),
    _op("hypot", "default", BINARY, lambda a, b: f"libdevice.hypot({a}, {b})", accepts=Accepts.FLOATING),
    _op("copysign", "Tensor Scalar", BINARY, lambda a, b: f"libdevice.copysign({a}, {b})", accepts=Accepts.FLOATING),
    _op("nextafter", "default", BINARY, lambda a, b: f"libdevice.nextafter({a}, {b})", accepts=Accepts.FLOATING),
    _op("logaddexp", "default", BINARY, _lib("logaddexp"), accepts=Accepts.FLOATING),
    _op("xlogy", "Tensor Scalar_Other", BINARY, _lib("xlogy"), accepts=Accepts.FLOATING),
    # --- comparisons: operands promote together, the result is bool ---
    *(
        _op(name, "Tensor Scalar", COMPARE, lambda a, b, s=symbol: f"{a} {s} {b}", result=Result.BOOL)
        for name, symbol in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))
    ),
    # --- logical and bitwise ---
    _op("logical_and", "default", LOGICAL, lambda a, b: f"{a} & {b}", result=Result.BOOL),
    _op("logical_or", "default", LOGICAL, lambda a, b: f"{a} | {b}", result=Result.BOOL),
    _op("logical_xor", "default", LOGICAL, lambda a, b: f"{a} ^ {b}", result=Result.BOOL),
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
        (("self", Typing.OUT), ("mask", Typing.BOOL), ("value", Typing.OUT)),
        lambda x, m, v: f"tl.where({m}, {v}, {x})",
    ),
    _op(
        "clamp",
        "default Tensor",
        (("self", Typing.OUT), ("min", Typing.OUT), ("max", Typing.OUT)),
        _clamp,
        int_render=_int_clamp,
        optional=frozenset({"min", "max"}),
    ),
    _op("clamp_min", "default Tensor", (("self", Typing.OUT), ("min", Typing.OUT)), lambda x, lo: _clamp(x, lo, None), int_render=lambda x, lo: _int_clamp(x, lo, None)),
    _op("clamp_max", "default Tensor", (("self", Typing.OUT), ("max", Typing.OUT)), lambda x, hi: _clamp(x, None, hi), int_render=lambda x, hi: _int_clamp(x, None, hi)),
    _op(
        "lerp",
        "Scalar Tensor",
        (("self", Typing.OUT), ("end", Typing.OUT), ("weight", Typing.OUT)),
        # ATen's two-sided form keeps lerp exact at weight 0 and 1.
        lambda a, b, w: f"tl.where(libdevice.fabs({w}) < 0.5, {a} + {w} * ({b} - {a}), {b} - ({b} - {a}) * (1.0 - {w}))",
        accepts=Accepts.FLOATING,
    ),
    _op(
        "addcmul",
        "default",
        (("self", Typing.OUT), ("tensor1", Typing.OUT), ("tensor2", Typing.OUT)),
        lambda x, a, b, value=1: f"{x} + {_scaled(value, f'{a} * {b}')}",
        attrs=("value",),
    ),
    _op(
        "addcdiv",
        "default",
        (("self", Typing.OUT), ("tensor1", Typing.OUT), ("tensor2", Typing.OUT)),
        lambda x, a, b, value=1: f"{x} + {_scaled(value, f'({a} / {b})')}",
        attrs=("value",),
        accepts=Accepts.FLOATING,
    ),
    # --- copies and casts: the value keeps its own dtype; fuser.codegen casts it to the output dtype ---
    _op("clone", "default", (("self", Typing.OWN),), lambda x: x, result=Result.OPERAND),
    _op("_to_copy", "default", (("self", Typing.OWN),), lambda x: x, result=Result.OPERAND),
    _op("lift_fresh_copy", "default", (("self", Typing.OWN),), lambda x: x, result=Result.OPERAND),
    _op("convert_element_type", "prims::convert_element_type.default", (("a", Typing.OWN),), lambda x: x, result=Result.OPERAND),
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
)

def _overload(qualified: str) -> torch._ops.OpOverload:
    namespace, _, rest = qualified.rpartition("::") if "::" in qualified else ("aten", "", qualified)
    packet, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def _index() -> tuple[dict, dict]:
    pointwise = {_overload(o): op for op in POINTWISE_OPS for o in op.overloads}
    views = {_overload(o): view for view in VIEW_OPS for o in view.overloads}
    return pointwise, views


POINTWISE_BY_OVERLOAD, VIEW_BY_OVERLOAD = _index()


def lowered_overloads() -> frozenset[torch._ops.OpOverload]:
    """Every aten overload the fuser can put in a kernel."""
    return frozenset(POINTWISE_BY_OVERLOAD) | frozenset(VIEW_BY_OVERLOAD)
