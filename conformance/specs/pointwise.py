"""Specs of pointwise ops: derived from the fuser's op table, their in-place twins, and the pointwise
backward ops autograd emits.

The fuser's table (`fuser.lower.ops.POINTWISE_BY_OVERLOAD`) lists what it lowers; deriving the specs from it
means a newly lowered op is tested without a second edit. What the table cannot say — attribute values
worth trying, integer divisors, casts' targets — is data here, keyed by op name.
"""

from __future__ import annotations

from typing import Any

import torch

from conformance.specs import OpSpec, exact, spec
from conformance.specs.combine import mixed
from conformance.specs.values import DTYPES
from fuser.lower.ops import POINTWISE_BY_OVERLOAD, Accepts, Result

_ALL = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16]
_ALL += [torch.int32, torch.int64, torch.uint8, torch.bool]

# Attribute arguments: each dict is one variant (every sample is called once per variant).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "add": [{}, {"alpha": 2}, {"alpha": -0.5}],
    "sub": [{}, {"alpha": 2}, {"alpha": -0.5}],
    "rsub": [{}, {"alpha": 2}],
    "div.Tensor_mode": [{"rounding_mode": None}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}],
    "div.Scalar_mode": [{"rounding_mode": None}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}],
    "gelu": [{}, {"approximate": "tanh"}],
    "softplus": [{}, {"beta": 2.0, "threshold": 5.0}, {"beta": 0.5, "threshold": 1.0}],
    "elu": [{}, {"alpha": 0.5, "scale": 2.0, "input_scale": 1.5}],
    "leaky_relu": [{}, {"negative_slope": 0.2}],
    "hardtanh": [{}, {"min_val": -2.0, "max_val": 0.5}],
    "logit": [{}, {"eps": 1e-6}, {"eps": 0.25}],
    "addcmul": [{}, {"value": 2}, {"value": -0.5}],
    "addcdiv": [{}, {"value": 2}, {"value": -0.5}],
    "nan_to_num": [{}, {"nan": 1.5, "posinf": 100.0, "neginf": -100.0}],
    "_to_copy": [{"dtype": d} for d in _ALL],
    "convert_element_type": [{"dtype": d} for d in _ALL],
    "gelu_backward": [{}, {"approximate": "tanh"}],
    "leaky_relu_backward": [{"negative_slope": 0.2, "self_is_result": False}],
    "elu_backward": [{"alpha": 1.0, "scale": 1.0, "input_scale": 1.0, "is_result": False}],
    "logit_backward": [{}, {"eps": 1e-6}],
}
DIVISORS = {"div": ("other",), "floor_divide": ("other",), "remainder": ("other",), "fmod": ("other",)}
CASTS = {"_to_copy", "convert_element_type"}
# Domains of the random values (the awkward values are always there): inverse trig and friends.
DOMAINS = {"acos": (-1.0, 1.0), "asin": (-1.0, 1.0), "atanh": (-1.0, 1.0), "erfinv": (-1.0, 1.0)}
EDGES: dict[str, tuple[float, ...]] = {
    "acos": (1.0000001, -1.0000001),
    "asin": (1.0000001, -1.0000001),
    "log": (1e-45,),
    "pow": (-0.5, 2.0),
}
# Where eager has no one answer: at these input values its vectorized CPU loop (whole SIMD vectors of a
# contiguous operand) and its scalar loop (a 3-element tensor, the tail after the last whole vector, a
# transposed operand) disagree, so the oracle skips those positions. direction -> argument -> values,
# and what eager does there (seen in probes: 3 and 259 elements, tail and transposed, float32).
_SCALAR_GRAD = "eager's scalar loop gives grad, its vectorized loop"
_NAN = ("nan",)
_MINUS_ZERO = "eager's vectorized loop gives -inf*grad, its scalar loop +inf*grad"
_INF = ("inf", "-inf")
# (Its CUDA kernel gives nan, as the fuser does: tests/fuser/test_results_match_eager.py.)
_LOGIT_NAN = "eager's scalar loop gives nan, its vectorized loop 0 (float16 to float64, torch 2.13)"
_EAGER_DEVICES_DISAGREE_AT_INF = "at self = ±inf eager's CPU kernel gives ±inf, its CUDA kernel nan"
UNSPECIFIED: dict[str, tuple[dict[str, dict[str, tuple[str, ...]]], str]] = {
    # copysign reads the sign of `other`; where `other` is a nan that eager's own ops made (the
    # from_reduction context's amax: its CPU vectorized loop returns x86's default nan, sign bit set),
    # that sign is the implementation's (IEEE 754 leaves an operation's nan sign unspecified).
    "copysign": (
        {"fwd": {"other": _NAN}, "bwd": {"other": _NAN}},
        "at a nan other: the sign of a nan eager's amax makes is x86's default (set), the input's was not",
    ),
    # signbit reads the sign of its input: where that is a nan eager's own ops made (the contexts' amax;
    # bfloat16's -(-x), whose scalar loop canonicalizes a nan and whose vectorized loop flips it), the
    # sign is the implementation's.
    "signbit": (
        {"fwd": {"self": _NAN}},
        "at a nan self: the sign of a nan eager's amax or bfloat16 negation makes is the implementation's",
    ),
    "hardtanh_backward": (
        {"fwd": {"self": _NAN, "min_val": _NAN, "max_val": _NAN}},
        f"at a nan self, min_val or max_val {_SCALAR_GRAD} 0",
    ),
    "hardswish_backward": ({"fwd": {"self": _NAN}}, f"at a nan self {_SCALAR_GRAD} nan"),
    "elu": ({"bwd": {"self": _NAN}}, f"the gradient at a nan input: {_SCALAR_GRAD} nan"),
    "elu_backward": ({"fwd": {"self_or_result": _NAN}}, f"at a nan self_or_result {_SCALAR_GRAD} nan"),
    "hardtanh": ({"bwd": {"self": _NAN}}, f"the gradient at a nan input: {_SCALAR_GRAD} 0"),
    "hardswish": ({"bwd": {"self": _NAN}}, f"the gradient at a nan input: {_SCALAR_GRAD} nan"),
    "logit_backward": (
        {"fwd": {"self": ("-0.0", "nan")}},
        f"at self = -0.0 {_MINUS_ZERO}; at a nan self with eps given {_LOGIT_NAN}",
    ),
    "logit": (
        {"bwd": {"self": ("-0.0", "nan")}},
        f"the gradient at -0.0: {_MINUS_ZERO}; at a nan input with eps given {_LOGIT_NAN}",
    ),
    # Eager's CPU kernel gives inf (i1: ±inf) at ±inf; its CUDA kernel nan (exp(x) * series / sqrt(x) is
    # inf / inf there), float64 too: seen on an H100, 2026-11-26 (docs/conformance.md).
    "i0": ({"fwd": {"self": _INF}, "bwd": {"self": _INF}}, _EAGER_DEVICES_DISAGREE_AT_INF),
    "special_i1": ({"fwd": {"self": _INF}, "bwd": {"self": _INF}}, _EAGER_DEVICES_DISAGREE_AT_INF),
}
# Fills: the value meets x in the same program (a fill held unrounded is right only when stored alone).
COMBINED = {"full_like": mixed, "masked_fill": mixed}
# Ops whose zero results have a sign IEEE 754 defines: exact arithmetic (x + y, x * y, x / y, -x, |x|,
# sqrt, rounding to integers) and odd functions correctly rounded at zero (f(-0.0) = -0.0). Eager and a
# fused kernel must agree on them (oracle rule 5); `1/x`, `atan2` and `copysign` downstream tell +0.0
# from -0.0. Elsewhere the sign of a zero is the formula's (lerp's two branches, a max of a tie), and
# eager's is one choice among equally right ones, so it is not checked.
ZERO_SIGN_DEFINED = {
    "neg", "abs", "add", "sub", "rsub", "mul", "div", "sqrt", "trunc", "floor", "ceil", "round",
    "sin", "tan", "asin", "atan", "sinh", "tanh", "asinh", "atanh", "expm1", "log1p", "erf",
}  # fmt: skip
# The oracle's rule 6 (ulps of the result's scale), where the default of 8 is too tight for a right lowering.
ULP_BUDGETS = {
    "special_i1": (16.0, "Bessel I1 by the interpreter's SciPy/libdevice series, not eager's Cephes polynomial: 13 ulps measured on int64 inputs promoted to float32"),
}  # fmt: skip
NOT_DIFFERENTIABLE = {"nextafter", "floor_divide", "lift_fresh_copy", "full_like", "_to_copy"}
NOT_DIFFERENTIABLE |= {"convert_element_type", "div"}  # prims.div has no autograd formula
# Pointwise ops that only appear in backward graphs (AOTAutograd emits them; a backend may lower or decompose them).
BACKWARD_OPS = (
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "threshold_backward",
    "hardtanh_backward",
    "leaky_relu_backward",
    "elu_backward",
    "softplus_backward",
    "hardsigmoid_backward",
    "hardswish_backward",
    "mish_backward",
    "logit_backward",
)


def _key_variants(packet: str, overload: str) -> list[dict[str, Any]]:
    return VARIANTS.get(f"{packet}.{overload}", VARIANTS.get(packet, [{}]))


def _derived(overload: torch._ops.OpOverload, *, inplace: bool = False) -> OpSpec:
    op = POINTWISE_BY_OVERLOAD[overload]
    packet = overload._schema.name.split("::")[1]
    name = f"{overload.namespace}.{packet}{'_' if inplace else ''}.{overload._overloadname}"
    dtypes = tuple(DTYPES)
    if op.accepts is Accepts.FLOATING:
        dtypes = (*(d for d in DTYPES if DTYPES[d].is_floating_point), "int32", "bool")  # ints promote
    differentiable = (
        not inplace
        and op.result is not Result.BOOL
        and op.accepts is not Accepts.INTEGRAL
        and packet not in NOT_DIFFERENTIABLE
    )
    return spec(
        name,
        family="elementwise",
        category="inplace" if inplace else ("cast" if packet in CASTS else "pointwise"),
        dtypes=dtypes,
        differentiable=differentiable,
        variants=tuple(_key_variants(packet, overload._overloadname)),
        domain=DOMAINS.get(packet),
        edges=EDGES.get(packet, ()),
        nonzero=DIVISORS.get(packet, ()),
        cast_safe=packet in CASTS,
        combine=COMBINED.get(packet),
        zero_sign_defined=packet in ZERO_SIGN_DEFINED,
        **_ulp_budget(packet),
        **_unspecified(packet, inplace),
        reference=exact.reference_for(overload, inplace),
    )


def _ulp_budget(packet: str) -> dict[str, Any]:
    if packet not in ULP_BUDGETS:
        return {}
    budget, reason = ULP_BUDGETS[packet]
    return {"ulp_budget": budget, "ulp_reason": reason}


def _unspecified(packet: str, inplace: bool = False) -> dict[str, Any]:
    where, reason = UNSPECIFIED.get(packet, ({}, ""))
    if inplace:  # an in-place twin has no backward
        where = {direction: args for direction, args in where.items() if direction == "fwd"}
    return {"unspecified_at": where, "unspecified_reason": reason} if where else {}


def _inplace_twin(overload: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    packet = overload._schema.name.split("::")[1]
    twin = getattr(getattr(torch.ops, overload.namespace), f"{packet}_", None)
    if twin is None or overload._overloadname not in twin.overloads():
        return None
    return getattr(twin, overload._overloadname)


def _creates(overload: torch._ops.OpOverload) -> bool:
    """An op with no tensor argument (full): there is no input to derive samples from."""
    tensor = torch._C.TensorType.get()
    return not any(a.type.isSubtypeOf(tensor) for a in overload._schema.arguments)


def pointwise_specs() -> list[OpSpec]:
    specs = []
    for overload in POINTWISE_BY_OVERLOAD:
        if overload._schema.name.split("::")[1] in BACKWARD_OPS:
            continue  # specified below, as the backward op it is
        if _creates(overload):
            continue  # specified with the other creation ops (conformance/specs/created.py)
        specs.append(_derived(overload))
        if _inplace_twin(overload) is not None:
            specs.append(_derived(overload, inplace=True))
    for packet in BACKWARD_OPS:
        specs.append(
            spec(
                f"aten.{packet}.default",
                family="elementwise",
                category="backward",
                dtypes=tuple(d for d in DTYPES if DTYPES[d].is_floating_point),
                variants=tuple(VARIANTS.get(packet, [{}])),
                **_unspecified(packet),
                reference=exact.reference_for(getattr(torch.ops.aten, packet).default, inplace=False),
            )
        )
    return specs
