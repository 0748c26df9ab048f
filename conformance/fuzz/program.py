"""A fuzzed program as data: inputs, a list of nodes (an op, operand references, view steps), outputs.

Values are numbered: `v0 … v{k-1}` are the inputs, and node i defines `v{k+i}`. An operand is a value
(seen through zero or more view steps), a Python scalar, or positions the program computes (`Positions`,
a gather's or a scatter's index). An in-place node updates its first operand
(an input or an earlier value) and names the updated tensor. The program renders to straight-line
source, which is what eager, the float64 reference and the backend all run, and what a repro prints:

    def program(v0, v1):
        v2 = torch.ops.aten.neg.default(v0.permute(1, 0))
        v3 = torch.ops.aten.add_.Tensor(v1, v2)
        return (v3,)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from conformance.specs.values import DTYPES, describe, lay_out, values_for

CASTS = ("aten._to_copy.default", "prims.convert_element_type.default")
VIEW_KINDS = ("permute", "transpose", "slice", "expand", "reshape", "unsqueeze")


@dataclass(frozen=True)
class Input:
    shape: tuple[int, ...]
    dtype: str
    layout: str  # a conformance.specs.values layout: gaps of a non-contiguous one hold nan
    specials: bool  # its first elements walk the dtype's awkward values
    domain: tuple[float, float] | None = None  # where its random values are drawn (its first reader's)

    def make(self, position: int, seed: int) -> torch.Tensor:
        values = values_for(
            self.shape,
            DTYPES[self.dtype],
            position=position,
            seed=seed,
            domain=self.domain,
            specials=self.specials,
            huge=False,  # sums of 1e30 and -1e30 depend on the order of summation: no one answer
        )
        if not values.dtype.is_floating_point and values.dtype != torch.bool:
            # Nor integer limits: promoted into a float sum, +-2**31 cancel differently in every order.
            values = values.clamp(-1000, 1000)
        return lay_out(values, self.layout)


@dataclass(frozen=True)
class View:
    kind: str  # one of VIEW_KINDS
    args: tuple = ()

    def source(self, operand: str) -> str:
        args = ", ".join(map(str, self.args))
        if self.kind == "slice":
            dim, start, step, stop = self.args
            where = f"{start}:{stop}" if step is None else f"{start or ''}::{step}"
            return f"{operand}[{':, ' * dim}{where}]"
        return f"{operand}.{self.kind}({args})"

    def apply(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.kind == "slice":
            dim, start, step, stop = self.args
            return tensor[(slice(None),) * dim + (slice(start, stop, step),)]
        return getattr(tensor, self.kind)(*self.args)


# Spreads an element's number over the positions (a prime well past any size drawn).
SPREAD = 7919


@dataclass(frozen=True)
class Positions:
    """An int64 index tensor the program computes, for gather and scatter: each element's number times
    SPREAD plus `salt`, modulo `high`. Every run of the program (eager, the float64 reference, the
    backend) reads the same positions, all within [0, high), on the device of value `like`."""

    shape: tuple[int, ...]
    high: int
    salt: int
    like: int

    def _steps(self) -> tuple[tuple[str, Any], ...]:
        """The tensor methods that make the positions from `arange`: the program's text and `make` alike."""
        return (("mul", SPREAD), ("add", self.salt), ("remainder", self.high), ("reshape", self.shape))

    def source(self) -> str:
        steps = "".join(f".{method}({_literal(arg)})" for method, arg in self._steps())
        return f"torch.arange({math.prod(self.shape)}, device=v{self.like}.device){steps}"

    def make(self, device: torch.device) -> torch.Tensor:
        positions = torch.arange(math.prod(self.shape), device=device)
        for method, arg in self._steps():
            positions = getattr(positions, method)(arg)
        return positions


@dataclass(frozen=True)
class Operand:
    value: int | None  # the value number, or None for a Python scalar or computed positions
    scalar: Any = None
    views: tuple[View, ...] = ()
    positions: Positions | None = None

    def source(self) -> str:
        if self.positions is not None:
            return self.positions.source()
        if self.value is None:
            return _literal(self.scalar)
        text = f"v{self.value}"
        for view in self.views:
            text = view.source(text)
        return text


@dataclass(frozen=True)
class Node:
    op: str  # the op's name ("aten.add.Tensor"); an in-place node calls its twin
    operands: tuple[Operand, ...]  # by position first, then `keywords` name the rest
    keywords: tuple[str, ...] = ()  # names of the trailing operands passed by keyword
    attrs: tuple[tuple[str, Any], ...] = ()  # attribute keywords (alpha=2, dim=[-1], keepdim=True)
    pick: int | None = None  # the element of a tuple result (max.dim's values)

    def call(self, widened: bool = False) -> str:
        """The call's source; `widened`, for the float64 reference: a cast to a floating dtype rounds
        as the program asks, and the value goes on in float64 (else the reference would compute the
        rest of the program in bfloat16, just as eager does, and judge nothing)."""
        dtype = dict(self.attrs).get("dtype")
        floating = isinstance(dtype, torch.dtype) and dtype.is_floating_point
        if widened and self.op in CASTS and (dtype is None or floating):
            return f"{self.call()}.to(torch.float64)"
        sources = [o.source() for o in self.operands]
        attrs = self.attrs
        if widened and floating and self.operands and self.operands[0].value is not None:
            # Another op's dtype= (sum, log_softmax) casts its input and computes in that dtype: the input
            # rounds as the program asks, and the op runs in float64 (else the reference is float32 too).
            sources[0] = f"{sources[0]}.to({dtype}).to(torch.float64)"
            attrs = tuple((k, torch.float64 if k == "dtype" else v) for k, v in attrs)
        positional = len(self.operands) - len(self.keywords)
        parts = sources[:positional]
        parts += [f"{k}={o}" for k, o in zip(self.keywords, sources[positional:], strict=True)]
        parts += [f"{k}={_literal(v)}" for k, v in attrs]
        text = f"torch.ops.{self.op}({', '.join(parts)})"
        return text if self.pick is None else f"{text}[{self.pick}]"


@dataclass(frozen=True)
class Program:
    inputs: tuple[Input, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]
    dtypes: tuple[str, ...] = ()  # every value's dtype (inputs, then nodes): the tolerance reads them
    differentiable: bool = False  # every op has a backward formula, no in-place op, a float input
    seed: int = 0
    draws: Any = field(default=None, compare=False, repr=False)  # what it was resolved from

    @property
    def op_count(self) -> int:
        """Nodes plus view steps: what a compiler engineer reads as the program's ops."""
        return len(self.nodes) + sum(len(o.views) for n in self.nodes for o in n.operands)

    def source(self, widened: bool = False) -> str:
        k = len(self.inputs)
        lines = [f"def program({', '.join(f'v{i}' for i in range(k))}):"]
        lines += [f"    v{k + i} = {node.call(widened)}" for i, node in enumerate(self.nodes)]
        returned = "".join(f"v{i}, " for i in self.outputs)
        lines.append(f"    return ({returned.rstrip()})")
        return "\n".join(lines) + "\n"

    def function(self, widened: bool = False) -> Callable:
        namespace = {"torch": torch, "inf": math.inf, "nan": math.nan}
        exec(compile(self.source(widened), f"<fuzz {self.key()}>", "exec"), namespace)
        return namespace["program"]

    def make_inputs(self, device: str = "cpu") -> list[torch.Tensor]:
        made = [spec.make(position, self.seed) for position, spec in enumerate(self.inputs)]
        return [t if device == "cpu" else _moved(t, device) for t in made]

    def describe_inputs(self) -> list[str]:
        return [
            f"v{i}: {describe(t)} ({spec.layout})"
            for i, (t, spec) in enumerate(zip(self.make_inputs(), self.inputs, strict=True))
        ]

    def key(self) -> str:
        """The program's identity: its source and its inputs (a repro's file name)."""
        text = self.source() + repr(self.inputs) + str(self.seed)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def _literal(value: Any) -> str:
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return repr(value)  # inf, -inf, nan: names the program's namespace defines
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, list | tuple):
        inner = ", ".join(map(_literal, value))
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)


def _moved(tensor: torch.Tensor, device: str) -> torch.Tensor:
    from conformance.specs.values import replicate

    return replicate(tensor, device)
