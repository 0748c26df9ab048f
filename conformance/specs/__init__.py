"""Op specs: one declarative entry per aten overload, checked when it is made.

A spec says how to make the op's samples (`family`, and the family's knobs: `variants` for attribute
arguments, `domain` and `edges` for values, `nonzero` for integer divisors, `args` for shaped ops),
which dtypes to try (those eager rejects on this device are dropped, never reported as passing),
whether the op is differentiable, any tolerance override with its reason, and the input values at
which eager itself has no one answer (`unspecified_at`, with its reason).

Every field is checked when the spec is made: an unknown field, an op that is not a real overload, a
dtype or family name that does not exist, a variant keyword the op's schema does not have, an
unknown unspecified value, or an override without a reason is a `SpecError`, so a typo can never
silently disable a test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from conformance.harness.oracle import UNSPECIFIED_VALUES
from conformance.specs.caseid import DIRECTIONS
from conformance.specs.values import DTYPES

FAMILIES = ("elementwise", "reduction", "shaped")
CATEGORIES = (
    "pointwise",
    "inplace",
    "cast",
    "reduction",
    "normalization",
    "view",
    "backward",
    "fallback",
    "created",
    "loss",
    "indexing",
    "random",
)


class SpecError(ValueError):
    """A malformed op spec; the message names the op and the field."""


@dataclass(frozen=True)
class OpSpec:
    op: str  # "aten.add.Tensor"
    family: str
    category: str
    dtypes: tuple[str, ...] = tuple(DTYPES)
    differentiable: bool = False
    variants: tuple[dict[str, Any], ...] = ({},)
    domain: tuple[float, float] | None = None  # where random values are drawn (awkward values always are)
    edges: tuple[float, ...] = ()  # extra awkward values: the op's domain edges and singularities
    nonzero: tuple[str, ...] = ()  # operands kept clear of 0 and -1 for integer dtypes (division)
    cast_safe: bool = False  # inputs finite and in range where the call casts to an integer dtype
    args: Callable | None = None  # shaped family: args(x, make) -> [(args, kwargs), ...]
    tolerance: dict[str, tuple[float, float]] | None = None  # dtype -> (rtol, atol)
    tolerance_reason: str = ""
    # Where eager's own kernels disagree (its vectorized and scalar CPU loops): direction -> argument ->
    # input values (names in oracle.UNSPECIFIED_VALUES). The oracle skips the results at those positions.
    unspecified_at: dict[str, dict[str, tuple[str, ...]]] | None = None
    unspecified_reason: str = ""
    # The oracle's precision rule (rule 6): this op's budget in ulps of a result's scale, where the
    # default (policy.ULP_BUDGET) is too tight for a legitimate lowering — with the reason.
    ulp_budget: float | None = None
    ulp_reason: str = ""
    # The oracle's rule 5 (zero signs) applies to ops whose zero results have a sign IEEE 754 defines
    # (ops_pointwise.ZERO_SIGN_DEFINED); elsewhere the sign follows the formula eager happens to use.
    zero_sign_defined: bool = False
    # combine(result, x): what the op's result meets in the same program, with x the sample's first input
    # (`partner`). Created tensors and fills are only wrong where a kernel combines them with other values
    # (a half fill kept in float32 is rounded right when stored alone); combining with an input also
    # keeps a backend from folding a created tensor into a constant.
    combine: Callable | None = None
    # Tensor arguments that are not differentiated in the bwd direction (a loss's target and weights:
    # autograd has no formula for them).
    not_differentiated: tuple[str, ...] = ()
    # Random ops: check(sample, output, grads, grad_outputs) -> "" or what is wrong, in place of the
    # comparison with eager's values (conformance/specs/random.py).
    check: Callable | None = None
    # Why the op may never reach the backend (Dynamo runs it eagerly, e.g. a data-dependent shape);
    # without it, a case whose op the backend never compiled fails, since it would pass vacuously.
    graph_break_reason: str = ""
    # results(args, kwargs): the positions of the op's results the suite checks for that call, where the
    # others are scratch that differs by device: the program returns only these (log_sigmoid_forward's
    # buffer has its input's shape on the CPU, is empty on CUDA, and PyTorch's meta function gives the CPU's
    # shape, so eager and meta disagree on CUDA; nll_loss2d's total_weight is never written on CUDA without
    # a reduction).
    results: Callable[[tuple, dict], tuple[int, ...]] | None = None
    # The op as the float64 reference computes it, where eager's own float64 kernel is not exact
    # (fmod and remainder: `conformance.specs.exact`); None: eager's op itself.
    reference: Callable | None = None

    @property
    def overload(self) -> torch._ops.OpOverload:
        return resolve(self.op)

    @property
    def name(self) -> str:
        return self.op


def resolve(op: str) -> torch._ops.OpOverload:
    """'aten.add.Tensor' -> torch.ops.aten.add.Tensor, or a SpecError naming what is missing."""
    parts = op.split(".")
    if len(parts) != 3:
        raise SpecError(f"op {op!r}: expected 'namespace.name.overload', e.g. 'aten.add.Tensor'")
    namespace, name, overload = parts
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        found = getattr(packet, overload)
    except (AttributeError, RuntimeError) as error:
        raise SpecError(f"op {op!r} is not an operator overload in this torch: {error}") from None
    if not isinstance(found, torch._ops.OpOverload):
        raise SpecError(f"op {op!r} is not an operator overload")
    return found


FIELDS = {f.name for f in dataclasses.fields(OpSpec)}


def shaped_spec(
    name: str,
    category: str,
    args: Callable,
    *,
    dtypes: tuple[str, ...] = tuple(DTYPES),
    differentiable: bool = True,
    **fields: Any,
) -> OpSpec:
    """A spec of the shaped family (views, normalizations, losses, created tensors, indexing, eager
    fallbacks, random ops) for `aten.<name>`: the constructor their modules share."""
    return spec(
        f"aten.{name}",
        family="shaped",
        category=category,
        args=args,
        dtypes=dtypes,
        differentiable=differentiable,
        **fields,
    )


def spec(op: str, **fields: Any) -> OpSpec:
    """Make and check one spec."""
    unknown = set(fields) - FIELDS
    if unknown:
        raise SpecError(f"op {op!r}: unknown field(s) {sorted(unknown)}; known: {sorted(FIELDS)}")
    made = OpSpec(op=op, **fields)
    check(made)
    return made


def check(s: OpSpec) -> None:
    overload = resolve(s.op)

    def fail(message: str) -> None:
        raise SpecError(f"op {s.op!r}: {message}")

    if s.family not in FAMILIES:
        fail(f"family {s.family!r} is not one of {FAMILIES}")
    if s.category not in CATEGORIES:
        fail(f"category {s.category!r} is not one of {CATEGORIES}")
    bad = [d for d in s.dtypes if d not in DTYPES]
    if bad or not s.dtypes:
        fail(f"unknown dtype(s) {bad}; known: {list(DTYPES)}" if bad else "no dtypes")
    arguments = {a.name for a in overload._schema.arguments}
    for variant in s.variants:
        if not isinstance(variant, dict):
            fail(f"variant {variant!r} is not a dict of keyword arguments")
        typos = set(variant) - arguments
        if typos:
            fail(f"variant keyword(s) {sorted(typos)} are not arguments of {overload._schema}")
    typos = set(s.nonzero) - arguments
    if typos:
        fail(f"nonzero names {sorted(typos)} are not arguments of {overload._schema}")
    typos = set(s.not_differentiated) - arguments
    if typos:
        fail(f"not_differentiated names {sorted(typos)} are not arguments of {overload._schema}")
    if s.domain is not None and not (len(s.domain) == 2 and s.domain[0] < s.domain[1]):
        fail(f"domain {s.domain!r} is not (low, high) with low < high")
    if (s.family == "shaped") != (s.args is not None):
        fail("the shaped family needs args(x, make), and only it takes them")
    if s.tolerance is not None:
        bad = [d for d in s.tolerance if d not in DTYPES]
        if bad:
            fail(f"tolerance for unknown dtype(s) {bad}")
        if not s.tolerance_reason.strip():
            fail("a tolerance override needs tolerance_reason: why this op may differ more")
    elif s.tolerance_reason:
        fail("tolerance_reason without a tolerance override")
    if s.ulp_budget is not None and not (s.ulp_budget > 0 and s.ulp_reason.strip()):
        fail("a ulp_budget must be positive and needs ulp_reason: why this op may lose more precision")
    elif s.ulp_budget is None and s.ulp_reason:
        fail("ulp_reason without a ulp_budget")
    if (s.category == "random") != (s.check is not None):
        fail("a random op needs check(sample, output, grads, grad_outputs), and only it takes one")
    if s.combine is not None and not callable(s.combine):
        fail(f"combine {s.combine!r} is not a function combine(result, x)")
    if s.unspecified_at is not None:
        check_unspecified(s, arguments, fail)
    elif s.unspecified_reason:
        fail("unspecified_reason without unspecified_at")


def check_unspecified(s: OpSpec, arguments: set[str], fail: Callable[[str], None]) -> None:
    if s.family != "elementwise":
        fail("unspecified_at is for elementwise ops: it marks positions of the broadcast inputs")
    if not s.unspecified_at:
        fail("unspecified_at is empty")
    for direction, where in s.unspecified_at.items():
        if direction not in DIRECTIONS:
            fail(f"unspecified_at direction {direction!r} is not one of {DIRECTIONS}")
        if direction == "bwd" and not s.differentiable:
            fail("unspecified_at 'bwd' on an op that is not differentiable")
        for argument, values in where.items():
            if argument not in arguments:
                fail(f"unspecified_at argument {argument!r} is not an argument of {s.overload._schema}")
            if isinstance(values, str) or not values:
                fail(f"unspecified_at[{direction!r}][{argument!r}] must be a non-empty tuple of values")
            bad = [v for v in values if v not in UNSPECIFIED_VALUES]
            if bad:
                fail(f"unspecified_at value(s) {bad} unknown; known: {list(UNSPECIFIED_VALUES)}")
    if not s.unspecified_reason.strip():
        fail("unspecified_at needs unspecified_reason: what eager does at those values")


def registry(specs: Iterable[OpSpec]) -> dict[str, OpSpec]:
    """Specs by op name; one entry per overload."""
    found: dict[str, OpSpec] = {}
    for s in specs:
        if s.op in found:
            raise SpecError(f"op {s.op!r} has two specs: one entry per overload")
        found[s.op] = s
    return found
