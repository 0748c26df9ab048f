"""A kernel body as typed statements whose reads are known (issue 28).

The builders (`fuser.codegen`, `fuser.row_codegen`) make every expression from its operands, so each
`Expr` carries the names it reads: a value's level, which index lines are live, and what a column loop
may hoist are read from these records, never recovered from the text. `lines` prints the statements as
the kernel's source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Expr:
    """Triton source text and the names (temporaries, indices, masks, parameters) it reads."""

    text: str
    reads: frozenset[str] = frozenset()
    atomic: bool = False  # a bare name: an operator applied to it needs no parentheses

    def __str__(self) -> str:
        return self.text


def name(target: str) -> Expr:
    return Expr(target, frozenset({target}), atomic=True)


def over(text: str, *parts: Expr | str | None) -> Expr:
    """`text`, made from `parts`: Exprs, or names (an index's "0" is the literal zero and reads nothing)."""
    reads: set[str] = set()
    for part in parts:
        if isinstance(part, Expr):
            reads |= part.reads
        elif part is not None and part != "0":
            reads.add(part)
    return Expr(text, frozenset(reads))


@dataclass(frozen=True)
class Assign:
    """A new temporary: `target = expr`, with its level (0 scalar, 1 per row, 2 per element)."""

    target: str
    expr: Expr
    level: int

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
            out.append(f"{s.target} = {s.expr}")
        elif isinstance(s, Update):
            out.append(f"{', '.join(s.targets)} = {s.expr}")
        elif isinstance(s, Effect):
            out.append(str(s.expr))
        else:
            out.append(f"for {s.variable} in range({s.start}, {s.end}, {s.step}):")
            out += ["    " + line for line in lines(s.body)]
    return out
