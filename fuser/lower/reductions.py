"""The reduction tables, as data, and the iteration space a reduction defines.

Two tables: `REDUCTION_OPS` maps each aten overload to a kind and to where its schema names the input,
dims and keepdim; `KINDS` says what each kind is (how a block starts, combines and finishes, what it
accumulates in, whether a split reduction can compute it, which `lib` combine functions its kernels call
and their NumPy twins under the interpreter). A new reduction kind is one `ReductionKind`, plus its
combine functions in `fuser.kernel_lib` and `fuser.interpreter.reduce` where it needs new ones.

A reduction reads a tensor of shape S and reduces a set of its dims D. A row kernel iterates over
`rows` (the kept dims of S, row-major) and `cols` (the reduced dims, row-major): it can compute every
value of shape S (full), and of the kept shape with or without the reduced dims (row values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from fuser.lower.dtypes import arithmetic_dtype
from fuser.lower.nodes import bind_arguments, meta
from fuser.lower.ops import NAN_ALL
from fuser.lower.shapes import same_shape


@dataclass(frozen=True)
class Combine:
    """How one kind of reduction starts, combines two blocks, and finishes a block along the row."""

    identity: str  # for floats; integers use `int_identity`
    int_identity: str | int  # a literal, or "min"/"max": the integer dtype's limit
    combine: str  # {a}, {b}: two blocks
    finish: str  # the `lib` function `tl.reduce` finishes a block with along the row (`fuser.emit.ir.Reduce`)
    int_combine: str | None = None
    int_finish: str | None = None


def _product_accumulates(out_dtype: torch.dtype) -> torch.dtype:
    """A floating product in float64: in float32 a split's partial product of a long row overflowed to
    inf before it met the row's zero elsewhere, so the partials combined to nan where the product is
    -0.0 (found by validation's fuzz stage, 2026-11-27, tests/fuser/test_reductions.py)."""
    return torch.float64 if out_dtype.is_floating_point else arithmetic_dtype(out_dtype)


@dataclass(frozen=True)
class ReductionKind:
    name: str
    # The shared combine rules; None for a kind with an emitter of its own (`emitter`).
    combine: Combine | None
    # Whether a split reduction can compute it: its partial results combine with its own combine.
    splittable: bool
    # The dtype it accumulates in, given its output's.
    accumulates: Callable[[torch.dtype], torch.dtype] = arithmetic_dtype
    # any/all: the input is tested for truth before it is combined.
    reads_truth: bool = False
    # The RowBuilder method that emits a kind of its own (var: two passes; argmax/argmin: value-index pairs).
    emitter: str | None = None
    # The `lib` combine functions its kernels pass to tl.reduce, each with its `fuser.interpreter.reduce`
    # twin: the interpreter calls any other combine function once per element, in Python.
    numpy_twins: dict[str, str] = field(default_factory=dict)


def _int32(out_dtype: torch.dtype) -> torch.dtype:
    return torch.int32


def _extreme(name: str, function: str, identity: str, int_identity: str) -> ReductionKind:
    """max or min: floats propagate nan as eager's amax/amin do; integers take the plain max/min."""
    return ReductionKind(
        name,
        Combine(
            identity,
            int_identity,
            f"tl.{function}({{a}}, {{b}}, {NAN_ALL})",
            f"lib.{function}_nan",
            f"tl.{function}({{a}}, {{b}})",
            f"lib.{function}",
        ),
        splittable=True,
        numpy_twins={f"{function}_nan": f"{function}_nan", function: function},
    )


def _truth(name: str, function: str, identity: str) -> ReductionKind:
    """any or all: the max or min of the input's truth, accumulated as int32."""
    return ReductionKind(
        name,
        Combine(identity, int(identity), f"tl.{function}({{a}}, {{b}})", f"lib.{function}"),
        splittable=True,
        accumulates=_int32,
        reads_truth=True,
        numpy_twins={function: function},
    )


KINDS: dict[str, ReductionKind] = {
    kind.name: kind
    for kind in (
        # lib.add is the interpreter's own sum combine there (NumPy's pairwise sum): no twin needed.
        ReductionKind("sum", Combine("0", 0, "{a} + {b}", "lib.add"), splittable=True),
        ReductionKind(
            "prod",
            Combine("1", 1, "{a} * {b}", "lib.multiply"),
            splittable=True,
            accumulates=_product_accumulates,
            numpy_twins={"multiply": "multiply"},
        ),
        _extreme("max", "maximum", "-float('inf')", "min"),
        _extreme("min", "minimum", "float('inf')", "max"),
        _truth("any", "maximum", "0"),
        _truth("all", "minimum", "1"),
        ReductionKind(
            "argmax", None, False, emitter="arg_reduction", numpy_twins={"argmax_combine": "argmax"}
        ),
        ReductionKind(
            "argmin", None, False, emitter="arg_reduction", numpy_twins={"argmin_combine": "argmin"}
        ),
        ReductionKind("var", None, False, emitter="variance"),  # its row sums use lib.add
    )
}


@dataclass(frozen=True)
class ReductionOp:
    name: str
    overloads: tuple[str, ...]
    kind: str  # a key of KINDS
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


def kind_of(node: fx.Node) -> ReductionKind:
    return KINDS[REDUCTION_BY_OVERLOAD[node.target].kind]


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
