"""Symbolic sizes: compare them without adding guards, and make them concrete at run time.

With `dynamic=True` (or Dynamo's automatic dynamic shapes) a graph's sizes are SymInts over symbols
such as s0. Kernels take sizes as arguments, so one compiled kernel serves every value; the launcher
binds each symbol from the graph's inputs (a SymInt input, or a tensor input's size) once per call
and evaluates the expressions it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import statically_known_true


def same(a: Any, b: Any) -> bool:
    """Whether two sizes are provably equal, without installing a guard."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return statically_known_true(a == b)


def same_shape(a: Sequence, b: Sequence) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))


def is_symbolic(value: Any) -> bool:
    return isinstance(value, torch.SymInt)


def free_symbols(value: Any) -> set[sympy.Symbol]:
    return set(value.node.expr.free_symbols) if is_symbolic(value) else set()


class SizeBinder:
    """Finds the value of every symbol from a graph's inputs: SymInt inputs first, then tensor sizes."""

    def __init__(self, graph: fx.Graph):
        self.sources: list[tuple[sympy.Symbol, int, int | None]] = []
        self.hints: list[int] = []  # each symbol's value in the example inputs the graph was traced with
        seen: set[sympy.Symbol] = set()
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        candidates = []
        for position, node in enumerate(placeholders):
            value = node.meta.get("val")
            if is_symbolic(value):
                candidates.append((value, position, None))
            elif isinstance(value, torch.Tensor):
                candidates += [(size, position, d) for d, size in enumerate(value.shape)]
        for value, position, dim in sorted(candidates, key=lambda c: c[2] is not None):
            if (
                is_symbolic(value)
                and isinstance(value.node.expr, sympy.Symbol)
                and value.node.expr not in seen
            ):
                seen.add(value.node.expr)
                self.sources.append((value.node.expr, position, dim))
                self.hints.append(int(value.node.hint))
        self.symbols = tuple(symbol for symbol, _, _ in self.sources)

    def key(self, args: Sequence[Any]) -> tuple[int, ...]:
        """The value of every symbol for this call, in `self.symbols` order."""
        if not self.sources:  # a graph of static sizes, the usual one: no generator a call
            return ()
        return tuple(int(args[p]) if d is None else args[p].size(d) for _, p, d in self.sources)


def concrete(value: Any, binding: dict[sympy.Symbol, int]) -> int:
    """`value` (an int or a SymInt) as an int under `binding`."""
    if not is_symbolic(value):
        return value
    return int(value.node.expr.xreplace(binding))
