"""Sample generators: for one op spec and one dtype, the calls the suite makes.

Three generators serve every spec (ops with the same shape of samples share one):

- `elementwise`: reads the op's schema — tensor arguments are operands (masks are bool), positional
  Scalar arguments get Python scalars — and makes the awkward-value walk, every operand as a 0-d
  tensor, promoting partners (a tensor and a 0-d tensor of another dtype), Python scalars, the shape
  family (0-d, zero-size in each position, one element, odd sizes, broadcast pairs and triples) and
  every layout.
- `reduction`: reads the schema's `dim` and `keepdim` arguments and reduces every shape over the
  innermost, the outermost, several and (where allowed) all dims, including zero-size dims, rows
  longer than one block and non-contiguous inputs; with ties for argmax/argmin.
- `shaped`: one input tensor per shape and layout, and the spec's `args(x, make)` builds the rest of
  the call (views, normalizations, ops the fuser leaves to eager).

A sample keeps real tensors. Samples eager rejects are dropped later by the runner, so a generator can
be generous. Everything is seeded by the spec, dtype and sample number.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from conformance.specs.values import DTYPES, inf, lay_out, nan, values_for

if TYPE_CHECKING:
    from conformance.specs import OpSpec


@dataclass
class Sample:
    """One call: positional args and kwargs holding real tensors, and a label saying what it tests."""

    args: tuple
    kwargs: dict[str, Any]
    label: str
    partner: torch.Tensor | None = None  # the input a spec's `combine` meets the result with

    def tensors(self) -> list[torch.Tensor]:
        return [
            t for t in flatten(self.args) + flatten(list(self.kwargs.values())) if isinstance(t, torch.Tensor)
        ]


def flatten(values) -> list:
    out = []
    for value in values:
        if isinstance(value, list | tuple):
            out += flatten(value)
        else:
            out.append(value)
    return out


@dataclass(frozen=True)
class Tier:
    """What a tier draws: the main odd shape, the shape family, and the long-row and large shapes."""

    name: str
    main: tuple[int, ...] = (37, 7)
    large: tuple[tuple[int, ...], ...] = ()
    long_rows: tuple[int, ...] = (3, 20000)  # longer than the CPU interpreter's largest block


TIERS = {
    "quick": Tier("quick"),
    "full": Tier("full", large=((1823, 781),), long_rows=(3, 70001)),
}

# Python scalars for Scalar operands: ints, floats (0.1 is exact in no float dtype), a bool, a signed
# zero, inf and nan.
SCALARS = (3, -2, 0.5, -2.5, 0.1, -0.0, inf, nan, True)
MASK_OPERANDS = {"condition", "mask"}

# Promoting partners of a tensor operand: a full tensor and a 0-d tensor of another dtype.
FULL_PARTNER = {
    "float16": "bfloat16",
    "bfloat16": "float32",
    "float32": "float64",
    "float64": "float32",
    "int8": "int16",
    "int16": "uint8",
    "int32": "int64",
    "int64": "float32",
    "uint8": "int8",
    "bool": "int32",
}
ZERO_D_PARTNER = {
    "float16": "float64",
    "bfloat16": "float64",
    "float32": "float64",
    "float64": "int64",
    "int8": "int64",
    "int16": "int64",
    "int32": "int64",
    "int64": "float64",
    "uint8": "int64",
    "bool": "int64",
}
# A 0-d float32 operand beside a half tensor, at a value the half dtype cannot hold (it rounds to inf):
# eager's CPU mul and div take a 0-d second operand at its own value where other ops round it first, and a
# backend that rounds it turns x * 1e5 in float16 into inf (found by the fuzzer: docs/fuzz.md, session 36).
UNHELD_0D = {"float16": 1e5, "bfloat16": 3.4e38}
# Shape families: each entry is one operand shape per operand (shorter lists repeat their last).
SHAPES_1 = ((), (0,), (1,), (5, 0, 3), (0, 7), (2, 3, 5, 4))
SHAPES_2 = (((), ()), ((37, 1), (1, 7)), ((5, 1, 3), (3,)), ((0, 7), (1, 7)), ((1,), (4, 0)), ((7,), ()))
SHAPES_3 = (((4, 1, 3), (1, 5, 1), (3,)), ((0, 3), (3,), ()), ((), (), ()))
# Layouts per operand for the main shape: operand i takes combo[i % len(combo)].
LAYOUT_COMBOS = (
    ("noncontiguous", "contiguous"),
    ("transposed", "expanded"),
    ("expanded", "offset"),
    ("offset", "noncontiguous"),
    ("contiguous", "transposed"),
)


def seed_of(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


class Maker:
    """Makes the tensors of one sample: seeded, walked through awkward values, laid out."""

    def __init__(self, spec: OpSpec, dtype: str, seed: int):
        self.spec, self.dtype, self.seed = spec, dtype, seed

    def __call__(
        self,
        shape,
        dtype: str | None = None,
        *,
        position: int = 0,
        layout: str = "contiguous",
        specials: bool = True,
        domain: tuple[float, float] | None = None,
        nonzero: bool = False,
        huge: bool = True,
    ) -> torch.Tensor:
        torch_dtype = DTYPES[dtype or self.dtype]
        values = values_for(
            tuple(shape),
            torch_dtype,
            position=position,
            seed=self.seed,
            domain=domain if domain is not None else self.spec.domain,
            edges=self.spec.edges,
            specials=specials,
            huge=huge,
        )
        if nonzero:
            values = clear_of_zero(values)
        return lay_out(values, layout)


def clear_of_zero(values: torch.Tensor) -> torch.Tensor:
    """Integer division by zero raises in eager and INT_MIN / -1 traps: keep integer divisors clear."""
    if values.dtype.is_floating_point:
        return values
    if values.dtype == torch.bool:
        return torch.ones_like(values)
    values = torch.where(values == 0, torch.ones_like(values), values)
    if values.dtype == torch.uint8:
        return values
    return torch.where(values == -1, torch.full_like(values, -5), values)


# --- elementwise ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    name: str
    kind: str  # "tensor" or "scalar"
    optional: bool
    mask: bool = False


def schema_operands(spec: OpSpec) -> list[Operand]:
    """Tensor arguments, and positional Scalar arguments not pinned by the spec's variants."""
    pinned = {key for variant in spec.variants for key in variant}
    found = []
    for argument in spec.overload._schema.arguments:
        type_name = str(argument.type)
        if argument.name in pinned:
            continue
        optional = type_name.startswith("Optional")
        if "Tensor" in type_name and "List" not in type_name:
            found.append(Operand(argument.name, "tensor", optional, argument.name in MASK_OPERANDS))
        elif "number" in type_name and not argument.kwarg_only:
            found.append(Operand(argument.name, "scalar", optional or argument.has_default_value()))
    return found


def positional_operands(spec: OpSpec, operands: list[Operand]) -> int:
    """How many leading operands can be passed by position: those before the first argument a variant
    pins by keyword (elu_backward's tensor `self_or_result` comes after its pinned scalars)."""
    names = [argument.name for argument in spec.overload._schema.arguments]
    pinned = [names.index(key) for variant in spec.variants for key in variant if key in names]
    first_pinned = min(pinned, default=len(names))
    return sum(1 for operand in operands if names.index(operand.name) < first_pinned)


def elementwise(spec: OpSpec, dtype: str, tier: Tier) -> Iterator[Sample]:
    operands = schema_operands(spec)
    positional = positional_operands(spec, operands)
    tensors = [i for i, o in enumerate(operands) if o.kind == "tensor"]
    scalar_slots = [i for i, o in enumerate(operands) if o.kind == "scalar"]
    counter = itertools.count()

    def build(
        shapes: list,
        layouts: list[str],
        *,
        pick: int = 0,
        choice: dict | None = None,
        label: str,
        every_variant=False,
    ):
        """One call per variant where asked (the full tier always asks), else the first variant only."""
        choice = choice or {}
        make = Maker(spec, dtype, seed_of(spec.op, dtype, next(counter)))
        args: list = []
        notes = []
        for i, operand in enumerate(operands):
            if operand.kind == "scalar":
                # Each pick shifts the scalars, so that a second scalar (clamp's max) meets other values;
                # optional scalars are also left out on some picks.
                omitted = operand.optional and pick in (1, 5)
                args.append(None if omitted else SCALARS[(pick + 3 * scalar_slots.index(i)) % len(SCALARS)])
                continue
            position = tensors.index(i)
            variant = choice.get(i, "full")
            if variant is None:
                args.append(None)
                notes.append(f"{operand.name}=None")
                continue
            if variant == "0d unheld":
                args.append(torch.tensor(UNHELD_0D[dtype], dtype=torch.float32))
                notes.append(f"{operand.name} 0-d float32 {UNHELD_0D[dtype]:g}")
                continue
            operand_dtype = "bool" if operand.mask else dtype
            shape = shapes[min(position, len(shapes) - 1)]
            if variant in ("partner", "0d partner"):
                operand_dtype = (FULL_PARTNER if variant == "partner" else ZERO_D_PARTNER)[dtype]
                notes.append(f"{operand.name} {variant} {operand_dtype}")
            if variant in ("0d", "0d partner"):
                shape = ()
            args.append(
                make(
                    shape,
                    operand_dtype,
                    position=position,
                    layout=layouts[position % len(layouts)],
                    nonzero=operand.name in spec.nonzero and position > 0,
                )
            )
        variants = spec.variants if every_variant or tier.name == "full" else spec.variants[:1]
        by_name = {
            operand.name: arg for operand, arg in zip(operands[positional:], args[positional:], strict=True)
        }
        for variant in variants:
            yield Sample(
                tuple(args[:positional]),
                {**by_name, **variant},
                label + (f" ({', '.join(notes)})" if notes else ""),
            )

    main = tier.main
    # The awkward-value walk with every operand full, then the promotion choices.
    choices: list[tuple[str, dict]] = [("walk", {})]
    if tensors:
        choices.append(("all 0-d", {i: "0d" for i in tensors}))
    if len(tensors) > 1:
        choices += [(f"{operands[i].name} 0-d", {i: "0d"}) for i in tensors]
    for i in tensors:
        if not operands[i].mask and tensors.index(i) > 0:
            choices += [(f"{operands[i].name} promotes", {i: v}) for v in ("partner", "0d partner")]
            if dtype in UNHELD_0D:
                choices.append((f"{operands[i].name} 0-d unheld", {i: "0d unheld"}))
    choices += [(f"{operands[i].name} omitted", {i: None}) for i in tensors if operands[i].optional]
    for label, choice in choices:
        every_pick = scalar_slots and (label == "walk" or (tier.name == "full" and label == "all 0-d"))
        for pick in range(len(SCALARS)) if every_pick else [0]:
            every_variant = label == "walk" and pick == 0
            yield from build(
                [main],
                ["contiguous"],
                pick=pick,
                choice=choice,
                label=f"{label} {main}",
                every_variant=every_variant,
            )
    family = {2: SHAPES_2, 3: SHAPES_3}.get(len(tensors), [(s,) for s in SHAPES_1])
    for shapes in family:
        yield from build(list(shapes), ["contiguous"], label=f"shapes {shapes}")
    for shape in tier.large:
        yield from build([shape], ["contiguous"], label=f"large {shape}")
    for combo in LAYOUT_COMBOS:
        yield from build([main], list(combo), label=f"layouts {combo}")
    yield from build([(2, 3, 5, 4)], ["channels_last"], label="channels_last (2, 3, 5, 4)")


# --- reductions ----------------------------------------------------------------------------------


def dim_argument(spec: OpSpec):
    for argument in spec.overload._schema.arguments:
        if argument.name == "dim":
            return argument
    return None


def takes_list(dim_type: str) -> bool:
    return "List" in dim_type  # the schema's "int[]" prints as List[int], "int?" as Optional[int]


def optional(dim_type: str | None) -> bool:
    return dim_type is not None and dim_type.startswith("Optional")


def reduction_dims(shape: tuple[int, ...], dim_type: str | None) -> list:
    """The dims to reduce `shape` over, as the schema's `dim` type takes them (None: every dim)."""
    rank = max(len(shape), 1)
    if dim_type is None:
        return [None]
    singles = sorted({-1, 0} if rank > 1 else {-1})
    if not takes_list(dim_type):
        return singles + ([None] if optional(dim_type) else [])
    lists = [[d] for d in singles]
    if len(shape) >= 2:
        lists.append([0, -1])
    if len(shape) >= 3:
        lists.append([0, 2])
    if optional(dim_type):
        lists.append(None)
    return lists


def reduction(spec: OpSpec, dtype: str, tier: Tier) -> Iterator[Sample]:
    dim_arg = dim_argument(spec)
    dim_type = str(dim_arg.type) if dim_arg is not None else None
    has_keepdim = any(a.name == "keepdim" for a in spec.overload._schema.arguments)
    shapes = [((), "contiguous"), ((1,), "contiguous"), (tier.main, "contiguous"), ((5, 0), "contiguous")]
    shapes += [((0, 7), "contiguous"), ((4, 5, 6), "contiguous"), (tier.long_rows, "contiguous")]
    shapes += [(tier.main, layout) for layout in ("noncontiguous", "transposed", "expanded", "offset")]
    shapes += [(shape, "contiguous") for shape in tier.large]
    for number, (shape, layout) in enumerate(shapes):
        make = Maker(spec, dtype, seed_of(spec.op, dtype, number))
        x = make(shape, layout=layout, huge=False)  # sums of 1e30 and -1e30 depend on the order
        every = tier.name == "full" or (shape == tier.main and layout == "contiguous")
        choices = reduction_dims(shape, dim_type)
        if not every and len(shape) < 3:
            choices = [choices[0]] + ([choices[-1]] if choices[-1] != choices[0] else [])
        for k, dims in enumerate(choices):
            keepdim = bool(k % 2) if has_keepdim else None
            for variant in spec.variants if every else spec.variants[:1]:
                call = dict(variant)
                if dim_type is not None:
                    call["dim"] = dims
                if has_keepdim:
                    call["keepdim"] = keepdim
                yield Sample((x,), call, f"{layout} {shape} dim={dims} keepdim={keepdim}")

    def along_the_last_dim(variant: dict[str, Any]) -> dict[str, Any]:
        call = dict(variant)
        if dim_type is not None:
            call["dim"] = [-1] if takes_list(dim_type) else -1
        if has_keepdim:
            call["keepdim"] = False
        return call

    # Ties (argmax/argmin must pick the first) and a row of all-equal values.
    make = Maker(spec, dtype, seed_of(spec.op, dtype, "ties"))
    ties = (
        make(tier.main, specials=False, domain=(0, 2.99)).floor() if DTYPES[dtype].is_floating_point else None
    )
    if ties is None:
        ties = make(tier.main, specials=False, domain=(0, 2))
    for variant in spec.variants:
        yield Sample((ties,), along_the_last_dim(variant), f"ties {tier.main}")
    # Magnitudes whose squares overflow a float32 sum though the moments do not: ATen's CPU var and std
    # accumulate in double (finite), CUDA's in float (inf); the fuser's float32 sum of squares gave inf on
    # the CPU (found by the fuzzer). Equal and opposite, so every reduction's answer is exact in any order.
    if DTYPES[dtype].is_floating_point:
        large = torch.tensor([[1.5e19, -1.5e19] * 5, [3.0, 4.0] * 5], dtype=DTYPES[dtype])
        yield Sample((large,), along_the_last_dim(spec.variants[0]), "squares past float32's range")


# --- shaped (views, normalizations, fallbacks) ---------------------------------------------------

SHAPED_SHAPES = ((), (1,), (0, 7), (4, 5, 6), (2, 3, 5, 4))


def shaped(spec: OpSpec, dtype: str, tier: Tier) -> Iterator[Sample]:
    plans = [
        (tier.main, layout) for layout in ("contiguous", "noncontiguous", "transposed", "expanded", "offset")
    ]
    plans += [(shape, "contiguous") for shape in (*SHAPED_SHAPES, tier.long_rows, *tier.large)]
    plans.append(((2, 3, 5, 4), "channels_last"))
    for number, (shape, layout) in enumerate(plans):
        make = Maker(spec, dtype, seed_of(spec.op, dtype, number))
        # Normalizations sum their rows: no magnitudes whose sum depends on the order (see awkward_values).
        x = make(shape, layout=layout, huge=spec.category != "normalization")
        for args, kwargs in spec.args(x, make):
            for variant in spec.variants:
                yield Sample(
                    tuple(args),
                    {**kwargs, **variant},
                    f"{layout} {tuple(shape)}",
                    x if spec.combine else None,
                )


GENERATORS: dict[str, Callable[[Any, str, Tier], Iterator[Sample]]] = {
    "elementwise": elementwise,
    "reduction": reduction,
    "shaped": shaped,
}


def generate(spec: OpSpec, dtype: str, tier: str) -> list[Sample]:
    return list(iter_samples(spec, dtype, tier))


def iter_samples(spec: OpSpec, dtype: str, tier: str) -> Iterator[Sample]:
    """The samples one at a time (probing a dtype needs only the first few)."""
    for sample in GENERATORS[spec.family](spec, dtype, TIERS[tier]):
        if spec.combine is not None and sample.partner is None:
            sample.partner = sample.tensors()[0]
        yield cast_safe(sample) if spec.cast_safe else sample


def cast_safe(sample: Sample) -> Sample:
    """Float-to-integer casts of nan, inf or out-of-range values are undefined behaviour in C++ (eager's
    answer depends on the CPU): where the call casts to an integer dtype, inputs are finite and in range."""
    target = sample.kwargs.get("dtype")
    if target is None or target.is_floating_point or target == torch.bool:
        return sample

    def safe(value):
        if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
            limit = min(
                torch.finfo(value.dtype).max, 2.0**7 if target in (torch.int8, torch.uint8) else 2.0**15
            )
            if target == torch.uint8:
                keep = value.isfinite() & (value >= 0) & (value < limit)
            else:
                keep = value.isfinite() & (value.abs() < limit)
            return torch.where(keep, value, torch.zeros((), dtype=value.dtype))
        return value

    return Sample(tuple(safe(a) for a in sample.args), sample.kwargs, sample.label, sample.partner)
