"""The ops a fuzzed program is built from: the conformance suite's own specs, read as data.

Pointwise ops and casts (for the fuser, its op table: `conformance/specs/pointwise.py` derives them from
it), their in-place twins, and reductions (`conformance/specs/reductions.py`). Views are not ops here but
steps on an operand (`conformance.fuzz.program.View`). Left out, each for a reason:

- pointwise backward ops (`*_backward`): autograd emits them; backward programs reach them anyway;
- ops whose spec says eager has no one answer at some inputs (`unspecified_at`) in the forward
  direction, and casts to the narrow integer dtypes (a float-to-integer cast of nan, inf or an
  out-of-range value is undefined behaviour in C++: casts to int32 and int64 are kept, and the
  resolution leaves such a cast out unless every value it casts is finite and in range);
- shaped ops (normalizations, fallbacks): their samples need hand-made arguments; but gather and scatter
  of a value (`INDEXED`), whose index the program computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from conformance.specs import OpSpec
from conformance.specs.catalog import SPECS
from conformance.specs.samples import dim_argument, positional_operands, schema_operands, takes_list

# Float-to-float ops whose result jumps where the operand crosses a point (an integer, a sign, a
# rounding boundary): they read only exactly computed values (see `FuzzOp.discontinuous`).
STEPPED = {
    "ceil",
    "floor",
    "round",
    "trunc",
    "frac",
    "sign",
    "sgn",
    "remainder",
    "fmod",
    "floor_divide",
    "copysign",
    "nextafter",
    "threshold",
    "signbit",
}
# Ops whose float32 result is the exactly rounded one on every backend (IEEE basic operations and
# selections): a value computed only by them is the same bits in eager and in a kernel.
EXACT = {
    "abs",
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "neg",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "clamp",
    "clamp_min",
    "clamp_max",
    "where",
    "masked_fill",
    "relu",
    "square",
    "clone",
    "lift_fresh_copy",
    "_to_copy",
    "convert_element_type",
    *STEPPED,
}


@dataclass(frozen=True)
class FuzzOp:
    """One op a program may call, and what a call needs."""

    spec: OpSpec
    kind: str  # "pointwise", "reduction" or "indexed"
    operands: tuple[tuple[str, str], ...] = ()  # pointwise: (name, "tensor" | "mask" | "scalar")
    positional: int = 1  # how many leading operands go by position
    variants: tuple[dict[str, Any], ...] = ({},)
    inplace: str | None = None  # the in-place twin's op name
    dim: str | None = None  # reduction: "int", "list" or None (no dim argument)
    dim_optional: bool = False
    keepdim: bool = False  # reduction: takes keepdim
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.op

    @property
    def packet(self) -> str:
        return self.spec.op.split(".")[1]

    @property
    def exact(self) -> bool:
        return self.kind == "pointwise" and self.packet in EXACT

    @property
    def discontinuous(self) -> bool:
        """Ops whose result may jump between nearby inputs: they read only exactly computed values,
        else eager's rounding of an intermediate (a bfloat16 one, a sum in another order) and a kernel's
        wider one would give different answers, both right."""
        return self.packet in STEPPED


def _pointwise(spec: OpSpec) -> FuzzOp | None:
    if spec.unspecified_at and "fwd" in spec.unspecified_at:
        return None
    found = schema_operands(spec)
    variants = spec.variants
    if spec.category == "cast":
        wide = (torch.bool, torch.int32, torch.int64)
        variants = tuple(v for v in variants if v["dtype"].is_floating_point or v["dtype"] in wide)
    twin = spec.op.replace(f".{spec.op.split('.')[1]}.", f".{spec.op.split('.')[1]}_.")
    operands = tuple((o.name, "mask" if o.mask else o.kind) for o in found)
    if not any(kind != "scalar" for _, kind in operands):
        return None
    return FuzzOp(
        spec,
        "pointwise",
        operands=operands,
        positional=positional_operands(spec, found),
        variants=variants,
        inplace=twin if twin in SPECS and SPECS[twin].category == "inplace" else None,
    )


def _reduction(spec: OpSpec) -> FuzzOp:
    argument = dim_argument(spec)
    dim_type = None if argument is None else str(argument.type)
    names = {a.name for a in spec.overload._schema.arguments}
    return FuzzOp(
        spec,
        "reduction",
        variants=spec.variants,
        dim=None if dim_type is None else ("list" if takes_list(dim_type) else "int"),
        dim_optional=dim_type is not None and dim_type.startswith("Optional"),
        keepdim="keepdim" in names,
    )


# Ops that read or write at positions an index tensor holds: the program computes their positions
# (`conformance.fuzz.program.Positions`), so any drawn value can be their input.
INDEXED = ("aten.gather.default", "aten.scatter.value")


def vocabulary(specs: dict[str, OpSpec] | None = None) -> tuple[FuzzOp, ...]:
    """Every op a program may call, in a fixed order (the strategies draw an index into it)."""
    found = []
    for spec in (specs or SPECS).values():
        if spec.family == "elementwise" and spec.category in ("pointwise", "cast"):
            op = _pointwise(spec)
        elif spec.family == "reduction":
            op = _reduction(spec)
        elif spec.op in INDEXED:
            op = FuzzOp(spec, "indexed", variants=spec.variants)
        else:
            op = None
        if op is not None:
            found.append(op)
    # Shrinking moves towards index 0: put the plainest ops first (add, mul, neg, then the rest).
    first = ("aten.add.Tensor", "aten.mul.Tensor", "aten.neg.default", "aten.sum.dim_IntList")
    return tuple(
        sorted(found, key=lambda op: (op.name not in first, first.index(op.name) if op.name in first else 0))
    )


VOCABULARY = vocabulary()
BY_NAME = {op.name: op for op in VOCABULARY}
