"""Which reductions a row kernel would read at another row than its own: the partitioner asks this before
any code is generated, and stores such a reduction by its own kernel.

A row kernel computes a reduction once per row and holds it in registers, so it can read it only at the
row it is reducing. A view between the reduction and a reader can move the row: a slice's start or a
flip is an index expression, not the row itself (the slice's start is a kernel argument, so even a start
of 0 is not known to keep the row). This walks the kernel's values as the row builder
(`fuser.emit.row_codegen.RowBuilder`) asks for them, from its stores and reductions down to its inputs,
mapping indices with the same functions (`fuser.lower.views`), but emits nothing: an index expression a view
would make becomes a name no row index equals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import fx
from torch.utils._pytree import tree_leaves

from fuser.emit import ir
from fuser.lower.nodes import bind_arguments, meta, tensor_meta
from fuser.lower.ops import INDEXED_BY_OVERLOAD, SCATTER_BY_OVERLOAD, VIEW_BY_OVERLOAD
from fuser.lower.reductions import Space, is_reduction, kind_of, reduction_input, space_of
from fuser.lower.shapes import same, same_shape
from fuser.lower.views import (
    KEEPS_ENTRIES,
    Index,
    at_position,
    broadcast_index,
    scatter_pieces,
    scatter_positions,
    source_index,
)
from fuser.testing import miscompiles

if TYPE_CHECKING:
    from fuser.plan.partition import Kernel


def full_index(space: Space) -> Index:
    """An element of the space: `r{d}` for a kept dim, `c{d}` for a reduced one, "0" where the size is 1."""
    return tuple(
        "0" if same(size, 1) else (f"r{d}" if d in space.kept else f"c{d}")
        for d, size in enumerate(space.shape)
    )


def row_index(space: Space, shape, full: Index) -> Index:
    """The index of a value of the row (a reduction's result, keepdim or not) of `shape`; `full` is the
    space's `full_index` (its callers hold it)."""
    if len(shape) == len(space.shape):
        return tuple(i if d in space.kept else "0" for d, i in enumerate(full))
    return tuple(full[d] for d in space.kept)


class _Names:
    """An index sink that emits nothing: a view's index expression becomes a fresh name."""

    def __init__(self):
        self.count = 0

    def int_param(self, hint: str, value: int) -> str:
        return hint

    def index_temp(self, expr: ir.Expr) -> str:
        self.count += 1
        return f"expr{self.count}"


# The nodes that may map an index to another row: every scatter and indexed op, and every view but those
# that only keep index entries (`views.KEEPS_ENTRIES`).
_MOVERS = (
    frozenset(o for o, view in VIEW_BY_OVERLOAD.items() if view.name not in KEEPS_ENTRIES)
    | frozenset(SCATTER_BY_OVERLOAD)
    | frozenset(INDEXED_BY_OVERLOAD)
)


def _moves_a_reduction(kernel: Kernel) -> bool:
    """Whether a view that may move a row, a scatter, or a broadcast from fewer dims reads one of the
    kernel's reductions, directly or through other nodes of the kernel: only such a node can map an index
    to another row. (Broadcasting aligns dims from the right, so `x.sum(-1) + x` reads row j's sum at
    column j; a reduction that keeps its dims broadcasts along its own rows.)
    Most row kernels have none, and the compile step skips the walk (the perf gate counts it)."""
    after: set[fx.Node] = set()  # the kernel's nodes downstream of one of its reductions
    for node in kernel.computed:  # in graph order: a node's inputs come before it
        if is_reduction(node) or any(i in after for i in node.all_input_nodes):
            if not is_reduction(node) and (node.target in _MOVERS or _broadcasts_up(node, after)):
                return True
            after.add(node)
    return False


def _broadcasts_up(node: fx.Node, after: set[fx.Node]) -> bool:
    value = tensor_meta(node)
    if value is None:  # a node of several results (its readers are getitems)
        return False
    ranks = [len(t.shape) for i in node.all_input_nodes if i in after and (t := tensor_meta(i)) is not None]
    return any(rank < len(value.shape) for rank in ranks)


def reads_at_other_rows(kernel: Kernel) -> set[fx.Node]:
    """The reductions of row kernel `kernel` that it would read at another row than their own."""
    if not _moves_a_reduction(kernel):
        return set()
    space, computed = kernel.space, set(kernel.computed)
    full = full_index(space)
    names, seen, found = _Names(), set(), set()

    def visit(node: fx.Node, index: Index) -> None:
        if node not in computed or (node, index) in seen:
            return
        seen.add((node, index))
        if is_reduction(node):
            if not space_of(node).same_as(space):
                return  # the kernel cannot hold it at all (its generation says so)
            if index != row_index(space, meta(node).shape, full):
                found.add(node)
                return
            source = reduction_input(node)
            if kind_of(node).emitter == "variance" and not any(
                same(space.shape[d], 0) for d in space.reduced
            ):
                visit(source, row_index(space, space.shape, full))  # the row's first value, its shift
            visit(source, full)
        elif node.target in VIEW_BY_OVERLOAD:
            kind = VIEW_BY_OVERLOAD[node.target].name
            args = miscompiles.rewrite("view_args", bind_arguments(node), node=node)
            source = node.all_input_nodes[0]
            visit(source, source_index(kind, args, index, meta(source).shape, meta(node).shape, names, kind))
        elif node.target in SCATTER_BY_OVERLOAD:
            kind = SCATTER_BY_OVERLOAD[node.target].name
            sources = [a for a in tree_leaves((node.args, node.kwargs)) if tensor_meta(a) is not None]
            shapes = [meta(s).shape for s in sources]
            for _, number, at in scatter_pieces(
                kind, bind_arguments(node), index, meta(node).shape, shapes, names, kind
            ):
                visit(sources[number], at)
        elif node.target in INDEXED_BY_OVERLOAD:  # read where the builder's `indexed` reads
            args = bind_arguments(node)
            shape = meta(node).shape
            dim, positions = args["dim"] % len(shape), args["index"]
            if INDEXED_BY_OVERLOAD[node.target].name == "gather":
                visit(positions, index)
                visit(args["self"], at_position(index, dim, names.index_temp(ir.Expr(""))))
            else:
                visit(args["self"], index)
                for at in scatter_positions(index, dim, shape, meta(positions).shape, names, "scatter")[1]:
                    visit(positions, at)
        else:  # a pointwise op: its tensor operands, broadcast
            for arg in node.all_input_nodes:
                visit(arg, broadcast_index(index, meta(node).shape, meta(arg).shape))

    for node in kernel.computed:
        if is_reduction(node):
            visit(node, row_index(space, meta(node).shape, full))
    for member in kernel.members:
        shape = meta(member).shape
        whole = not is_reduction(member) and same_shape(shape, space.shape)
        visit(member, full if whole else row_index(space, shape, full))
    return found
