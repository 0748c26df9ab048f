"""Planted miscompiles, for testing only: never on unless an environment variable asks for one.

The quality tests show that the conformance suite and the fuzzer *can* fail: they plant one known
miscompile and check that it is caught. Each kind is data — where codegen consults it (a hook point)
and a function that changes what codegen was about to emit — so a new kind is one entry here plus, at
most, one `rewrite(point, ...)` call at a new place in codegen.

    FUSER_TESTING_MISCOMPILE=swap_computed_operands          # a kind by name
    FUSER_TESTING_MISCOMPILE=wrong_lowering:aten.mul.Tensor  # a kind that takes an argument
    FUSER_TESTING_WRONG_LOWERING=aten.mul.Tensor             # the older spelling of the line above

Hook points (codegen calls `rewrite(point, value, **context)`; the planted kind may change `value`). No
builder holds state for a kind: what one remembers between hook points (a row kernel's store) it keeps here.

- `pointwise_expr`: a pointwise node's rendered expression (context: node, op).
- `pointwise_operands`: its operands (`fuser.emit.ir.Expr`), already cast (context: builder, node, args, wants).
- `operand_index`: the index a pointwise node reads an operand at (context: builder, arg, out_shape).
- `leaf_value`: an input's value at an index, before it is loaded (context: builder, node, index).
- `store_index`: the index a row kernel stores a member at, before making its value (context: builder, node).
- `epilogue`: a row kernel's statements (`fuser.emit.ir`), those from `start` on its epilogue: its stores
  of full-shape values, and any column sums after them (context: start, space).
- `loop_mask`: the column bound of a looped row kernel's mask (context: builder, end).
- `pointwise_attrs`: a pointwise node's attributes, such as a rounding mode (context: node).
- `block_mask`: the element bound of a pointwise kernel's block mask (context: builder).
- `reduction_identity`: a float row reduction's identity for masked lanes (context: kind).
- `view_args`: a view's bound arguments, before its index is mapped to its source's (context: node).
- `gather_position`: the position a gather reads its source at along its dim (context: index, dim).
- `graph`: the aten graph before partitioning (context: backward).

The kind is read once as each compile starts (`compiling`), so a test may set the variable in-process
between compiles; codegen's hooks read only what that compile holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch import fx

ENV = "FUSER_TESTING_MISCOMPILE"
WRONG_LOWERING_ENV = "FUSER_TESTING_WRONG_LOWERING"  # kept: `wrong_lowering:<op>` under its old name
POINTS = (
    "pointwise_expr",
    "pointwise_operands",
    "operand_index",
    "leaf_value",
    "store_index",
    "epilogue",
    "loop_mask",
    "graph",
    "pointwise_attrs",
    "block_mask",
    "reduction_identity",
    "view_args",
    "gather_position",
)


@dataclass(frozen=True)
class Miscompile:
    what: str  # what it changes, in a sentence
    # hook point (one of POINTS) -> (value, argument, **context) -> the value codegen emits instead
    hooks: dict[str, Callable[..., Any]]
    takes_argument: bool = False


# --- the kinds' changes -------------------------------------------------------------------------


def _wrong_lowering(expr: str, argument: str, node: fx.Node, op: Any) -> str:
    from fuser.lower.ops import Result

    if str(node.target) != argument:
        return expr
    return f"(({expr}) == 0)" if op.result is Result.BOOL else f"(({expr}) + 1)"


def _broadcast_stride_dropped(index: tuple, argument: None, builder: Any, arg: Any, out_shape) -> tuple:
    from fuser.lower.ops import VIEW_BY_OVERLOAD

    # Only an operand that is a view (of an input or of a computed value) *and* broadcast.
    if getattr(arg, "target", None) not in VIEW_BY_OVERLOAD or tuple(arg.meta["val"].shape) == tuple(
        out_shape
    ):
        return index
    live = [d for d, i in enumerate(index) if i != "0"]
    if not live:
        return index
    return tuple("0" if d == live[-1] else i for d, i in enumerate(index))


def _swap_computed_operands(operands: list, argument: None, builder: Any, node: fx.Node, args, wants) -> list:
    computed = [
        k for k, a in enumerate(args) if isinstance(a, fx.Node) and a in builder.computed and operands[k]
    ]
    if (
        len(computed) != 2
        or wants[computed[0]] != wants[computed[1]]
        or args[computed[0]] is args[computed[1]]
    ):
        return operands
    first, second = computed
    swapped = list(operands)
    swapped[first], swapped[second] = operands[second], operands[first]
    return swapped


def _cast_before_last_op(operands: list, argument: None, builder: Any, node: fx.Node, args, wants) -> list:
    from fuser.lower.ops import POINTWISE_BY_OVERLOAD, Result

    casts = [
        user
        for user in node.users
        if user in builder.computed
        and getattr(POINTWISE_BY_OVERLOAD.get(user.target), "result", None) is Result.OPERAND
        and user.meta["val"].dtype != node.meta["val"].dtype
    ]
    if not casts:
        return operands
    target = casts[0].meta["val"].dtype
    # Round each tensor operand to the cast's dtype first, as if the cast ran before this op.
    return [
        builder.cast(builder.cast(o, want, target), target, want) if isinstance(a, fx.Node) else o
        for o, a, want in zip(operands, args, wants, strict=True)
    ]


def _neighbour_row(body: list, argument: None, start: int, space: Any) -> list:
    """A row kernel's epilogue (`body[start:]`, its stores of full-shape values) loads its inputs one row
    further on: its own loads, and the earlier loads it reads, issued again at its start."""
    from fuser.emit import ir
    from fuser.emit.codegen import unflatten

    def moved(expr: ir.Expr) -> ir.Expr:  # a load's row index r{d} read as the next row's n{d}
        if isinstance(expr, ir.Cast):
            return ir.Cast(moved(expr.operand), expr.source, expr.target, expr.opaque)
        if not isinstance(expr, ir.Load):
            return expr
        terms = tuple((re.sub(r"^r(\d+)$", r"n\1", i), stride) for i, stride in expr.address.terms)
        return ir.Load(ir.Address(expr.address.pointer, terms), expr.mask, expr.dtype, expr.eviction)

    def move(s: Any) -> Any:
        if isinstance(s, ir.Loop):
            return dataclasses.replace(s, body=tuple(map(move, s.body)))
        return dataclasses.replace(s, expr=moved(s.expr)) if isinstance(s, ir.Assign) else s

    epilogue, read = [move(s) for s in body[start:]], ir.reads(body[start:])
    again = [m for s in body[:start] if isinstance(s, ir.Assign) and s.target in read and (m := move(s)) != s]
    rows_next = ir.Assign("rows_next", ir.over("(rows + 1) % num_rows", "rows", "num_rows"), 1)
    index = ir.live([rows_next, *unflatten("rows_next", space.kept, space.shape, "n", 1)], again + epilogue)
    return [*body[:start], *index, *again, *epilogue]


def _tail_mask(bound: str, argument: None, builder: Any, end: str) -> str:
    return f"{end} - 1"  # the last column of every long row is masked off


# What each row kernel's builder is storing (`store_index`), or `_own_output_read` while that computes an
# update's value: the kind's own state, which the builders never hold.
_storing: WeakKeyDictionary[Any, Any] = WeakKeyDictionary()


def _note_store(index: tuple, argument: None, builder: Any, node: fx.Node) -> tuple:
    _storing[builder] = node
    return index


def _own_output_read(value: Any, argument: None, builder: Any, node: fx.Node, index: tuple) -> Any:
    """An input the kernel updates in place, read (directly or through an alias view) at another element
    than the one being written, or for another output of the kernel, gives the updated value: as if the
    kernel wrote the input in place and then read what it had already written."""
    from fuser.lower.ops import VIEW_BY_OVERLOAD

    storing = _storing.get(builder)
    if storing is _own_output_read:
        return value
    base, mapped = node, index
    while base.target in VIEW_BY_OVERLOAD and base not in builder.computed:
        base, mapped = base.all_input_nodes[0], builder.view_index(base, mapped)
    update = base.meta.get("fuser_testing_updated_by")
    own = builder.full_index() if hasattr(builder, "full_index") else builder.domain_index()
    if update is None or update not in builder.computed:
        return value
    if mapped == own and (storing is None or storing is update):
        return value  # the update itself reads the element it writes: that much is right
    _storing[builder] = _own_output_read  # the update itself reads the input as it was
    try:
        return builder.value(update, mapped)
    finally:
        _storing[builder] = storing


def _note_updated_inputs(graph: fx.Graph, argument: None, backward: bool) -> fx.Graph:
    """Mark each forward-graph input that the program updates in place with the node of its new value
    (AOTAutograd returns the new values of mutated inputs first, in input order)."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    if backward or metadata is None:
        return graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    (output,) = [n for n in graph.nodes if n.op == "output"]
    mutated = [p for p, info in zip(placeholders, metadata.input_info, strict=False) if info.mutates_data]
    for placeholder, new in zip(mutated, output.args[0], strict=False):
        if isinstance(new, fx.Node):
            placeholder.meta["fuser_testing_updated_by"] = new
    return graph


# --- the conformance suite's catching table (docs/conformance.md) ----------------------------------


def _partial_block_mask(bound: str, argument: None, builder: Any) -> str:
    # The last block, when partial, masks off its last element; full blocks are right.
    return f"({bound} - (({bound} % BLOCK) != 0).to(tl.int32))"


def _leaf_broadcast_stride_dropped(index: tuple, argument: None, builder: Any, arg: Any, out_shape) -> tuple:
    # An input read straight from memory and broadcast against the output reads its innermost live dim at
    # index 0, as if it were broadcast there too.
    if (
        not isinstance(arg, fx.Node)
        or arg in builder.computed
        or tuple(arg.meta["val"].shape) == tuple(out_shape)
    ):
        return index
    live = [d for d, i in enumerate(index) if i != "0"]
    return tuple("0" if live and d == live[-1] else i for d, i in enumerate(index))


def _reduction_identity(identity: str, argument: None, kind: str) -> str:
    # max and min start from 0 instead of -inf / +inf: wrong only where a row lies wholly below (above)
    # zero and has masked lanes.
    return "0" if kind in ("max", "min") else identity


def _nan_not_propagated(expr: str, argument: None, node: fx.Node, op: Any) -> str:
    # maximum, minimum and clamp take the non-nan operand, as tl.maximum does by default.
    return expr.replace("propagate_nan=tl.PropagateNan.ALL", "propagate_nan=tl.PropagateNan.NONE")


def _view_step_ignored(bound: dict, argument: None, node: fx.Node) -> dict:
    # A strided slice computed inside a kernel reads consecutive elements (its step taken as 1).
    return bound | {"step": 1} if bound.get("step", 1) != 1 else bound


def _rounding_mode_swapped(attrs: dict, argument: None, node: fx.Node) -> dict:
    swapped = {"floor": "trunc", "trunc": "floor"}
    if attrs.get("rounding_mode") in swapped:
        return attrs | {"rounding_mode": swapped[attrs["rounding_mode"]]}
    return attrs


def _zero_sign_flipped(expr: str, argument: None, node: fx.Node, op: Any) -> str:
    # neg computed as 0 - x: neg(+0.0) gives +0.0 instead of -0.0 (x + 0.0 turns -0.0 into +0.0).
    if str(node.target) != "aten.neg.default" or not node.meta["val"].dtype.is_floating_point:
        return expr
    return f"(({expr}) + 0.0)"


def _constant_rounded(expr: str, argument: None, node: fx.Node, op: Any) -> str:
    # Every float literal with more than four significant digits rounded to four (0.7978845608 -> 0.7979).
    def four_digits(match: re.Match) -> str:
        return (
            f"{float(match.group(0)):.4g}"
            if len(match.group(0).replace(".", "").lstrip("0")) > 4
            else match.group(0)
        )

    return re.sub(r"(?<![\w.])\d+\.\d+(?:e-?\d+)?", four_digits, expr)


def _gather_reads_own_position(position: str, argument: None, index: tuple, dim: int) -> str:
    # The loaded position ignored: a gather reads its source at the output element's own position.
    return index[dim]


# --- the registry -------------------------------------------------------------------------------

KINDS: dict[str, Miscompile] = {
    # The catching table's kinds (docs/conformance.md): which tier of the suite finds each.
    "partial_block_mask": Miscompile(
        "a pointwise kernel's last block, when partial, masks off its last element",
        {"block_mask": _partial_block_mask},
    ),
    "broadcast_misread": Miscompile(
        "an input broadcast against the output reads its innermost live dim at index 0",
        {"operand_index": _leaf_broadcast_stride_dropped},
    ),
    "reduction_identity": Miscompile(
        "float max/min row reductions start masked lanes at 0 instead of -inf/+inf",
        {"reduction_identity": _reduction_identity},
    ),
    "nan_not_propagated": Miscompile(
        "maximum, minimum and clamp return the non-nan operand instead of nan",
        {"pointwise_expr": _nan_not_propagated},
    ),
    "view_step_ignored": Miscompile(
        "a slice with a step, computed inside a kernel, reads consecutive elements",
        {"view_args": _view_step_ignored},
    ),
    "rounding_mode_swapped": Miscompile(
        "division's rounding modes swapped: floor computes trunc and trunc floor",
        {"pointwise_attrs": _rounding_mode_swapped},
    ),
    "zero_sign_flipped": Miscompile(
        "neg computed as 0 - x: neg(+0.0) is +0.0, not -0.0",
        {"pointwise_expr": _zero_sign_flipped},
    ),
    "constant_rounded": Miscompile(
        "float constants inside a lowering's formula rounded to four significant digits",
        {"pointwise_expr": _constant_rounded},
    ),
    "gather_reads_own_position": Miscompile(
        "a gather reads its source at the output element's own position along its dim, not the loaded one",
        {"gather_position": _gather_reads_own_position},
    ),
    "wrong_lowering": Miscompile(
        "the named overload's lowering adds one to its value (negates a bool result)",
        {"pointwise_expr": _wrong_lowering},
        takes_argument=True,
    ),
    "broadcast_stride_dropped": Miscompile(
        "an operand that is a view and is broadcast against the output reads its innermost dim at "
        "index 0 (its stride dropped)",
        {"operand_index": _broadcast_stride_dropped},
    ),
    "epilogue_neighbour_row": Miscompile(
        "a row kernel's epilogue loads its inputs from the next row (the last row wraps to the first)",
        {"epilogue": _neighbour_row},
    ),
    "cast_before_last_op": Miscompile(
        "a pointwise op that a cast in the same kernel reads rounds its operands to the cast's dtype "
        "before computing, instead of the cast rounding its result after",
        {"pointwise_operands": _cast_before_last_op},
    ),
    "swap_computed_operands": Miscompile(
        "a binary op whose two tensor operands are both computed in the kernel gets them swapped",
        {"pointwise_operands": _swap_computed_operands},
    ),
    "tail_mask": Miscompile(
        "a looped row kernel (a row longer than one block) masks off the last column of every row",
        {"loop_mask": _tail_mask},
    ),
    "inplace_reads_own_output": Miscompile(
        "an input updated in place, read at another element than the one being written or for another "
        "output of the kernel, reads the updated value (a kernel writing the input in place and then "
        "reading what it already wrote)",
        {"graph": _note_updated_inputs, "store_index": _note_store, "leaf_value": _own_output_read},
    ),
}
for _name, _kind in KINDS.items():
    if not set(_kind.hooks) <= set(POINTS):  # a misspelt hook point would never fire
        raise ValueError(
            f"miscompile {_name!r}: unknown hook point(s) {sorted(set(_kind.hooks) - set(POINTS))}"
        )


# The kind planted for the compile in progress: read from the environment once, as it starts
# (`compiling`), so a test may switch it between compiles, and codegen's hooks never read the environment.
# None when nothing is planted, and inside `off()`: the fuser generating kernels for itself (fingerprints'
# probes) never plants one, since those say which ops are validated.
_active: ContextVar[tuple[Miscompile, str | None] | None] = ContextVar("fuser_miscompile", default=None)


@contextmanager
def _holding(chosen: tuple[Miscompile, str | None] | None) -> Iterator[None]:
    token = _active.set(chosen)
    try:
        yield
    finally:
        _active.reset(token)


def compiling() -> contextlib.AbstractContextManager[None]:
    """For one compile: the planted kind, if the environment names one, is what `rewrite` applies."""
    chosen = planted()
    return _holding(None if chosen is None else (KINDS[chosen[0]], chosen[1]))


def off() -> contextlib.AbstractContextManager[None]:
    return _holding(None)


def planted() -> tuple[str, str | None] | None:
    """The kind the environment plants and its argument, or None (the default: no miscompile)."""
    text = os.environ.get(ENV, "")
    if not text and os.environ.get(WRONG_LOWERING_ENV):
        text = f"wrong_lowering:{os.environ[WRONG_LOWERING_ENV]}"
    if not text:
        return None
    name, _, argument = text.partition(":")
    kind = KINDS.get(name)
    if kind is None:
        known = ", ".join(KINDS)
        raise ValueError(f"{ENV}={text!r}: unknown miscompile {name!r}; known: {known}")
    if kind.takes_argument != bool(argument):
        need = "needs an argument (kind:argument)" if kind.takes_argument else "takes no argument"
        raise ValueError(f"{ENV}={text!r}: miscompile {name!r} {need}")
    return name, argument or None


def rewrite(point: str, value: Any, **context: Any) -> Any:
    """`value`, changed by the kind planted for this compile if it hooks `point`; unchanged otherwise.
    One context-variable read when nothing is planted."""
    chosen = _active.get()
    if chosen is None:
        return value
    kind, argument = chosen
    change = kind.hooks.get(point)
    return value if change is None else change(value, argument, **context)
