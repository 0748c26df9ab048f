"""The reduction table, as data, and the iteration space a reduction defines.

A reduction reads a tensor of shape S and reduces a set of its dims D. A row kernel iterates over
`rows` (the kept dims of S, row-major) and `cols` (the reduced dims, row-major): it can compute every
value of shape S (full), and of the kept shape with or without the reduced dims (row values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from fuser.nodes import bind_arguments, meta
from fuser.shapes import same_shape


@dataclass(frozen=True)
class ReductionOp:
    name: str
    overloads: tuple[str, ...]
    kind: str  # sum | prod | max | min | argmax | argmin | any | all | var
    input: str  # the schema argument reduced
    dims: str | None  # the schema argument naming the dims (None or [] means all dims)
    keepdim: str | None


def _op(
    name: str,
    overloads: str,
    kind: str,
    input: str = "self",
    dims: str | None = "dim",
    keepdim: str | None = "keepdim",
):
    qualified = tuple(o if "." in o else f"{name}.{o}" for o in overloads.split())
    return ReductionOp(name, qualified, kind, input, dims, keepdim)


REDUCTION_OPS: tuple[ReductionOp, ...] = (
    _op("sum", "dim_IntList", "sum"),
    _op("sum", "default", "sum", dims=None, keepdim=None),
    _op("sum", "prims::sum.default", "sum", input="inp", dims="dims", keepdim=None),
    _op("prod", "dim_int", "prod"),
    _op("prod", "default", "prod", dims=None, keepdim=None),
    _op("amax", "default", "max"),
    _op("amin", "default", "min"),
    _op("argmax", "default", "argmax"),
    _op("argmin", "default", "argmin"),
    _op("any", "dim dims", "any"),
    _op("any", "default", "any", dims=None, keepdim=None),
    _op("all", "dim dims", "all"),
    _op("all", "default", "all", dims=None, keepdim=None),
    _op("var", "prims::var.default", "var", input="inp", dims="dims", keepdim=None),
)


def _overload(qualified: str) -> torch._ops.OpOverload:
    namespace, _, rest = qualified.rpartition("::") if "::" in qualified else ("aten", "", qualified)
    packet, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


REDUCTION_BY_OVERLOAD = {_overload(o): op for op in REDUCTION_OPS for o in op.overloads}


def is_reduction(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target in REDUCTION_BY_OVERLOAD


def reduction_input(node: fx.Node) -> fx.Node:
    op = REDUCTION_BY_OVERLOAD[node.target]
    return bind_arguments(node)[op.input]


def reduced_dims(node: fx.Node) -> tuple[int, ...]:
    op = REDUCTION_BY_OVERLOAD[node.target]
    rank = meta(reduction_input(node)).dim()
    dims: Any = bind_arguments(node)[op.dims] if op.dims else None
    if dims is None or dims == []:
        return tuple(range(rank))
    if rank == 0:
        return ()  # a 0-d tensor's dim 0 or -1 is the tensor itself: nothing to reduce
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted({d + rank if d < 0 else d for d in dims}))


@dataclass(frozen=True)
class Space:
    """A row kernel's iteration space: the full shape and the dims its reductions reduce."""

    shape: tuple
    reduced: tuple[int, ...]

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(d for d in range(len(self.shape)) if d not in self.reduced)

    def keepdim_shape(self) -> tuple:
        return tuple(1 if d in self.reduced else s for d, s in enumerate(self.shape))

    def squeezed_shape(self) -> tuple:
        return tuple(self.shape[d] for d in self.kept)

    def accepts(self, shape) -> bool:
        """Whether a value of `shape` can be computed in this space (full, or one value per row)."""
        return any(same_shape(shape, s) for s in (self.shape, self.keepdim_shape(), self.squeezed_shape()))

    def same_as(self, other: Space | None) -> bool:
        return other is not None and self.reduced == other.reduced and same_shape(self.shape, other.shape)


def space_of(node: fx.Node) -> Space:
    return Space(tuple(meta(reduction_input(node)).shape), reduced_dims(node))
