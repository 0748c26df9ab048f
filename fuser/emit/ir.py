"""A kernel body as typed statements whose reads are known (issue 28).

The builders (`fuser.emit.codegen`, `fuser.emit.row_codegen`) make every expression from its operands, so each
`Expr` carries the names it reads: a value's level, which index lines are live, and what a column loop
may hoist are read from these records, never recovered from the text. `lines` prints the statements as
the kernel's source.

Memory accesses, conversions and constants are nodes of their own, printed here: an `Address` (a
pointer and its index terms over strides), a `Load` and a `Store` through one (with their mask), a
`Cast` from one dtype to another, a `Const` of a dtype; so are a reduction's pieces: an `Accumulator`
(a block of its identity), a `Where` (a masked lane's value) and a `Reduce` (a block combined along an
axis). A pass can read what a kernel loads and stores, where, under which mask, what it converts and
what it accumulates, from the statements (`nodes`, `accesses`, `accumulators`); their text is the same
as the builders wrote before these nodes existed (every validation fingerprint unchanged).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from fuser.lower.dtypes import triton_name, value_dtype


@dataclass(frozen=True)
class Expr:
    """Triton source text and the names (temporaries, indices, masks, parameters) it reads."""

    text: str
    reads: frozenset[str] = frozenset()
    atomic: bool = False  # a bare name: an operator applied to it needs no parentheses
    parts = ()  # the nodes a node is made of (`nodes` walks them); text made by `over` hides its own

    def __str__(self) -> str:
        return self.text


class Address(Expr):
    """`pointer` plus its terms: `(index, stride)` adds `index * stride` (a stride of "0" widens a scalar
    address to a block's shape), `(name, None)` adds `name` (the flat `offset`, a row)."""

    pointer: str
    terms: tuple[tuple[str, str | None], ...]

    def __init__(self, pointer: str, terms: tuple[tuple[str, str | None], ...] = ()):
        text, reads = pointer, {pointer}
        for index, stride in terms:
            if stride is None:
                text += f" + {index}"
            else:
                text += f" + {index} * {stride}"
                reads.add(stride)
            reads.add(index)
        reads.discard("0")
        self.__dict__.update(atomic=False, text=text, reads=frozenset(reads), pointer=pointer, terms=terms)

    @property
    def flat(self) -> bool:
        """Whether it addresses at the flat offset (a contiguous tensor of the kernel's shape)."""
        return ("offset", None) in self.terms

    @property
    def strided(self) -> bool:
        """Whether an index the kernel computes, times a stride, is among its terms (a pointwise kernel
        makes such an index from its flat offset by integer division)."""
        return any(stride is not None for _, stride in self.terms)

    def widened(self, *names: str) -> Address:
        return Address(self.pointer, (*self.terms, *((name, "0") for name in names)))


class Load(Expr):
    """`tl.load` of `dtype` values through `address`, under `mask` (a name, or None for a scalar)."""

    address: Address
    mask: str | None
    dtype: torch.dtype
    eviction: str | None

    def __init__(self, address: Address, mask: str | None, dtype: torch.dtype, eviction: str | None = None):
        masked = f", mask={mask}" if mask else ""
        hint = f", eviction_policy='{eviction}'" if eviction else ""
        reads = address.reads | {mask} if mask else address.reads
        text = f"tl.load({address.text}{masked}{hint})"
        self.__dict__.update(
            atomic=False, text=text, reads=reads, address=address, mask=mask, dtype=dtype, eviction=eviction
        )


class Store(Expr):
    """`tl.store` of `value` through `address`, under `mask` (a name, or None for a scalar)."""

    address: Address
    value: Expr
    mask: str | None

    def __init__(self, address: Address, value: Expr, mask: str | None):
        masked = f", mask={mask}" if mask else ""
        reads = address.reads | value.reads | ({mask} if mask else set())
        text = f"tl.store({address.text}, {value.text}{masked})"
        self.__dict__.update(text=text, reads=reads, address=address, value=value, mask=mask, parts=(value,))


class Cast(Expr):
    """`operand`, held as `source`, converted to `target` in one step: bfloat16 through its bits
    (`lib.widen_bf16`, `lib.narrow_bf16`, to and from float32), bool as `!= 0`, else `.to`. An `opaque`
    widening of a half value to float32 is `lib.widen_opaque` (`fuser.emit.narrowing` says where and why)."""

    operand: Expr
    source: torch.dtype
    target: torch.dtype
    opaque: bool

    def __init__(self, operand: Expr, source: torch.dtype, target: torch.dtype, opaque: bool = False):
        wrapped = operand.text if operand.atomic else f"({operand})"
        if opaque:
            assert target == torch.float32, "an opaque widening is to float32"
            text = f"lib.widen_opaque({operand})"
        elif source == torch.bfloat16:
            assert target == torch.float32, "bfloat16 widens to float32 first"
            text = f"lib.widen_bf16({operand})"
        elif target == torch.bfloat16:
            assert source == torch.float32, "bfloat16 narrows from float32"
            text = f"lib.narrow_bf16({operand})"
        elif target == torch.bool:
            text = f"({wrapped} != 0)"
        else:
            text = f"{wrapped}.to({triton_name(target)})"
        self.__dict__.update(
            text=text,
            reads=operand.reads,
            operand=operand,
            source=source,
            target=target,
            opaque=opaque,
            parts=(operand,),
        )


# Printed constants by (type, repr, dtype, logical): rounding through torch costs about 2 ms a call while
# the backend compiles (under fake tensors), and a 200-parameter optimizer step prints the same few
# constants thousands of times. repr keeps -0.0 apart from 0.0 and makes nan a key that matches itself.
_CONSTANTS: dict[tuple, str] = {}


class Const(Expr):
    """A Python scalar as a Triton constant of `dtype`, first rounded to `logical` where eager rounds it
    (a comparison with a half tensor compares against the half value), and wrapped as eager wraps it
    (int8 + 300). Floats start from float64, so a float64 kernel sees 0.1 exactly."""

    value: Any
    dtype: torch.dtype

    def __init__(self, value: Any, dtype: torch.dtype, logical: torch.dtype | None = None):
        key = (type(value), repr(value), dtype, logical)
        text = _CONSTANTS.get(key)
        if text is None:
            text = _CONSTANTS[key] = _print_constant(value, dtype, logical)
        self.__dict__.update(atomic=False, text=text, reads=frozenset(), value=value, dtype=dtype)


def _print_constant(value: Any, dtype: torch.dtype, logical: torch.dtype | None) -> str:
    start = torch.tensor(value, dtype=torch.float64) if isinstance(value, float) else torch.tensor(value)
    cast = start.to(logical or dtype).to(dtype).item()
    if dtype == torch.bool:
        return f"tl.full([], {bool(cast)}, tl.int1)"
    name = triton_name(value_dtype(dtype))
    if not dtype.is_floating_point:
        return f"tl.full([], {int(cast)}, {name})"
    if cast != cast:
        return f'tl.full([], float("nan"), {name})'
    if abs(cast) == float("inf"):
        return f'tl.full([], {"" if cast > 0 else "-"}float("inf"), {name})'
    if cast == 0 and math.copysign(1.0, cast) < 0:
        # Triton builds a -0.0 constant as +0.0 (and negating it computes 0 - 0): spell out the sign bit.
        bits = {torch.float64: ("-9223372036854775808", "tl.int64")}.get(
            value_dtype(dtype), ("-2147483648", "tl.int32")
        )
        return f"tl.full([], {bits[0]}, {bits[1]}).to({name}, bitcast=True)"
    return f"tl.full([], {cast!r}, {name})"


class Accumulator(Expr):
    """`tl.full(shape, identity, dtype)`: a block of a reduction's identity, an accumulator's start (an
    `Assign` of one is a reduction's accumulator: `accumulators`) or what a masked lane holds."""

    shape: tuple[str, ...]
    identity: str | int
    dtype: torch.dtype

    def __init__(
        self, identity: str | int, dtype: torch.dtype, shape: tuple[str, ...] = ("XBLOCK", "RBLOCK")
    ):
        text = f"tl.full([{', '.join(shape)}], {identity}, {triton_name(dtype)})"
        self.__dict__.update(text=text, reads=frozenset(), shape=shape, identity=identity, dtype=dtype)


class Where(Expr):
    """`tl.where(condition, value, other)`: `value` where `condition` holds (a lane in bounds: `mask`)."""

    def __init__(self, condition: Expr | str, value: Expr, other: Expr):
        text = f"tl.where({condition}, {value}, {other})"
        parts = tuple(p for p in (condition, value, other) if isinstance(p, Expr))
        reads = _reads((condition, value, other))
        self.__dict__.update(
            text=text, reads=reads, parts=parts, condition=condition, value=value, other=other
        )


class Reduce(Expr):
    """`tl.reduce(values, axis, combine)` of a block, or of a tuple of blocks (value and index pairs);
    `keep` indexes the result back to a block's two dims."""

    def __init__(self, values: Expr | tuple[Expr, ...], axis: int, combine: str, keep: bool = True):
        parts = values if isinstance(values, tuple) else (values,)
        operand = values.text if isinstance(values, Expr) else f"({', '.join(v.text for v in parts)})"
        kept = ("[None, :]", "[:, None]")[axis] if keep else ""
        text = f"tl.reduce({operand}, {axis}, {combine}){kept}"
        self.__dict__.update(
            text=text, reads=_reads(parts), parts=parts, axis=axis, combine=combine, keep=keep
        )


def _reads(parts: Iterable[Expr | str | None]) -> frozenset[str]:
    """What `parts` read: Exprs' reads, and names (an index's "0" is the literal zero and reads nothing)."""
    reads: set[str] = set()
    for part in parts:
        if isinstance(part, Expr):
            reads |= part.reads
        elif part is not None and part != "0":
            reads.add(part)
    return frozenset(reads)


def name(target: str) -> Expr:
    return Expr(target, frozenset({target}), atomic=True)


def over(text: str, *parts: Expr | str | None) -> Expr:
    """`text`, made from `parts`: Exprs, or names (an index's "0" is the literal zero and reads nothing)."""
    return Expr(text, _reads(parts))


@dataclass(frozen=True)
class Assign:
    """A new temporary: `target = expr`, with its level (0 scalar, 1 per row, 2 per element) and the dtype
    it holds where the builder says (None: an index, a mask, a tuple)."""

    target: str
    expr: Expr
    level: int
    dtype: torch.dtype | None = None
    comment: str = ""  # printed after it, for the reader

    @property
    def reads(self) -> frozenset[str]:
        return self.expr.reads


@dataclass(frozen=True)
class Update:
    """Loop-carried accumulators given their next value: belongs to its loop, never hoisted out."""

    targets: tuple[str, ...]
    expr: Expr

    @property
    def reads(self) -> frozenset[str]:
        return self.expr.reads | frozenset(self.targets)


@dataclass(frozen=True)
class Effect:
    """A statement run for its effect, such as a store."""

    expr: Expr

    @property
    def reads(self) -> frozenset[str]:
        return self.expr.reads


@dataclass(frozen=True)
class Loop:
    """`for {variable} in range({start}, {end}, {step}):` over `body`."""

    variable: str
    start: Expr
    end: Expr
    step: str
    body: tuple[Statement, ...]

    @property
    def reads(self) -> frozenset[str]:
        inner = frozenset().union(*(s.reads for s in self.body))
        return self.start.reads | self.end.reads | inner


Statement = Assign | Update | Effect | Loop


def reads(statements: Iterable[Statement]) -> frozenset[str]:
    return frozenset().union(*(s.reads for s in statements))


def live(candidates: list[Assign], uses: Iterable[Statement]) -> list[Assign]:
    """The assignments among `candidates` that `uses` (or a kept candidate) read: unused index math goes."""
    read, kept = set(reads(uses)), []
    for statement in reversed(candidates):
        if statement.target in read:
            kept.append(statement)
            read |= statement.reads
    return kept[::-1]


def lines(statements: Iterable[Statement]) -> list[str]:
    """The statements as source lines, a loop's body indented under it."""
    out: list[str] = []
    for s in statements:
        if isinstance(s, Assign):
            out.append(f"{s.target} = {s.expr}" + (f"  # {s.comment}" if s.comment else ""))
        elif isinstance(s, Update):
            out.append(f"{', '.join(s.targets)} = {s.expr}")
        elif isinstance(s, Effect):
            out.append(str(s.expr))
        else:
            out.append(f"for {s.variable} in range({s.start}, {s.end}, {s.step}):")
            out += ["    " + line for line in lines(s.body)]
    return out


def _flat(statements: Iterable[Statement]) -> Iterable[Assign | Update | Effect]:
    for s in statements:
        yield from _flat(s.body) if isinstance(s, Loop) else (s,)


def nodes(statements: Iterable[Statement], kind: type | Any) -> list:
    """Every node of `kind` in `statements`, in order, inside loops too, a node's parts before it (a load
    as its temporary is made, through the casts around it; a store after the value it stores)."""
    found: list = []

    def visit(expr: Expr) -> None:
        for part in expr.parts:
            visit(part)
        if isinstance(expr, kind):
            found.append(expr)

    for statement in _flat(statements):
        visit(statement.expr)
    return found


def accesses(statements: Iterable[Statement]) -> list[Load | Store]:
    """Every load and store of `statements`, in order."""
    return nodes(statements, Load | Store)


def accumulators(statements: Iterable[Statement]) -> list[Assign]:
    """The temporaries that start as a block of a reduction's identity, inside loops too: the accumulators
    a column loop updates (a looped row kernel's, a column sum's)."""
    return [s for s in _flat(statements) if isinstance(s, Assign) and isinstance(s.expr, Accumulator)]
