"""Views inside a kernel move indices, not values.

An index is a tuple of Triton expressions, one per dimension, with "0" for a dimension that is
broadcast (or has size 1). Each function maps an index into a view's output to the index of the
element it reads in the view's input. Sizes and offsets come from `IndexSink.int_param`, so they are
kernel arguments rather than constants baked into the source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from fuser.emit import ir
from fuser.lower.shapes import same, same_shape

Index = tuple[str, ...]


class IndexSink(Protocol):
    def int_param(self, hint: str, value: int) -> str: ...

    def index_temp(self, expr: ir.Expr) -> str: ...


def broadcast_index(index: Index, out_shape: Sequence[int], in_shape: Sequence[int]) -> Index:
    """Implicit broadcasting: right-align the shapes; a size-1 dimension of the operand reads index 0."""
    lead = len(out_shape) - len(in_shape)
    return tuple("0" if same(in_shape[d], 1) else index[d + lead] for d in range(len(in_shape)))


def _dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides (a size-0 dimension counts as 1, as in torch); sizes may be symbolic."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step = step * torch.sym_max(size, 1)
    return tuple(strides[::-1])


def _reshape(index, in_shape, out_shape, sink: IndexSink, name: str) -> Index:
    # Reshape keeps row-major order: flatten the output index, then unflatten it in the input's shape.
    if same_shape(in_shape, out_shape):
        return index
    in_dims = [d for d, size in enumerate(in_shape) if not same(size, 1)]
    out_dims = [d for d, size in enumerate(out_shape) if not same(size, 1)]
    if same_shape([in_shape[d] for d in in_dims], [out_shape[d] for d in out_dims]):
        # Only size-1 dims come or go (a squeeze or unsqueeze in disguise): no index arithmetic.
        source = dict(zip(in_dims, (index[d] for d in out_dims), strict=True))
        return tuple(source.get(d, "0") for d in range(len(in_shape)))
    out_strides = contiguous_strides(out_shape)
    terms = [
        (i, sink.int_param(f"{name}_out_stride{d}", s))
        for d, (i, s) in enumerate(zip(index, out_strides, strict=True))
        if i != "0"
    ]
    if not terms:
        return tuple("0" for _ in in_shape)
    flat = sink.index_temp(
        ir.over(" + ".join(f"{i} * {s}" for i, s in terms), *(n for t in terms for n in t))
    )
    in_strides = contiguous_strides(in_shape)
    result = []
    for d, size in enumerate(in_shape):
        if same(size, 1):
            result.append("0")
            continue
        stride = sink.int_param(f"{name}_in_stride{d}", in_strides[d])
        quotient = f"{flat} // {stride}"
        if d == 0:
            result.append(sink.index_temp(ir.over(quotient, flat, stride)))
        else:
            in_size = sink.int_param(f"{name}_in_size{d}", size)
            result.append(sink.index_temp(ir.over(f"({quotient}) % {in_size}", flat, stride, in_size)))
    return tuple(result)


def _permute(index: Index, dims: Sequence[int]) -> Index:
    source = [""] * len(index)
    for k, dim in enumerate(dims):
        source[_dim(dim, len(index))] = index[k]
    return tuple(source)


def _squeeze(index: Index, in_shape: Sequence[int], dims: Sequence[int] | None) -> Index:
    rank = len(in_shape)
    if rank == 0:
        return index  # a 0-d tensor's dim 0 or -1 is the tensor itself: squeezing it removes nothing
    removed = set(range(rank)) if dims is None else {_dim(d, rank) for d in dims}
    removed = {d for d in removed if same(in_shape[d], 1)}
    out = iter(index)
    return tuple("0" if d in removed else next(out) for d in range(rank))


# The view kinds whose mapping only drops, adds or broadcasts size-1 dims: each entry of the source's index
# is an entry of the view's index, in the same order, or "0", and no index expression is made. They never
# move a row of a row kernel (`fuser.plan.row_reads`); every other kind may (tests/fuser/test_views.py).
KEEPS_ENTRIES = frozenset({"expand", "unsqueeze", "squeeze", "alias", "broadcast_in_dim"})


def source_index(
    kind: str, args: dict[str, Any], index: Index, in_shape, out_shape, sink: IndexSink, name: str
) -> Index:
    """The input index a view of kind `kind` (a `fuser.lower.ops.ViewOp` name) reads for output `index`."""
    if kind == "view":
        return _reshape(index, in_shape, out_shape, sink, name)
    if kind == "permute":
        return _permute(index, args["dims"])
    if kind == "transpose":
        dims = list(range(len(index)))
        a, b = _dim(args["dim0"], len(index)), _dim(args["dim1"], len(index))
        dims[a], dims[b] = dims[b], dims[a]
        return _permute(index, dims)
    if kind == "t":
        return index[::-1]
    if kind == "expand":
        return broadcast_index(index, out_shape, in_shape)
    if kind == "unsqueeze":
        dim = _dim(args["dim"], len(out_shape))
        return index[:dim] + index[dim + 1 :]
    if kind == "squeeze":
        dims = args.get("dims", args.get("dim"))
        return _squeeze(index, in_shape, [dims] if isinstance(dims, int) else dims)
    if kind == "slice":
        dim = _dim(args["dim"], len(in_shape))
        size = in_shape[dim]
        start = args["start"] or 0
        start = torch.sym_min(torch.sym_max(start + size if start < 0 else start, 0), size)
        step = args["step"]
        strided = index[dim] if step == 1 else f"{index[dim]} * {step}"
        first = sink.int_param(f"{name}_start", start)
        moved = sink.index_temp(ir.over(f"{first} + {strided}", first, index[dim]))
        return (*index[:dim], moved, *index[dim + 1 :])
    if kind == "select":
        dim = _dim(args["dim"], len(in_shape))
        position = args["index"] + in_shape[dim] if args["index"] < 0 else args["index"]
        return (*index[:dim], sink.int_param(f"{name}_index", position), *index[dim:])
    if kind == "alias":
        return index
    if kind == "broadcast_in_dim":
        # Input dim k becomes output dim broadcast_dimensions[k]; a size-1 input dim broadcasts.
        dims = args["broadcast_dimensions"]
        return tuple("0" if same(in_shape[k], 1) else index[d] for k, d in enumerate(dims))
    raise NotImplementedError(f"view kind {kind!r} has no index mapping")


Piece = tuple[ir.Expr | None, int, Index]  # (condition, which source, the index read in it)


def scatter_pieces(
    kind: str, args: dict[str, Any], index: Index, out_shape, source_shapes, sink: IndexSink, name: str
) -> list[Piece]:
    """For output `index` of a scatter of kind `kind` (a `fuser.lower.ops.ScatterOp` name) over its tensor
    inputs (`source_shapes`, in argument order): where each element comes from, as pieces tried in order,
    the last with no condition (none at all for an empty result). Every index read is clamped into its source, so each read stays in bounds
    at every element, also where its piece's value is not the one kept."""
    if kind == "slice_scatter":  # sources: self, src
        dim = _dim(args["dim"], len(out_shape))
        if same(source_shapes[1][dim], 0):
            return [(None, 0, index)]  # nothing is written (and src has no element to read)
        size = out_shape[dim]
        start = args["start"] or 0
        start = torch.sym_min(torch.sym_max(start + size if start < 0 else start, 0), size)
        step = args["step"]
        # Written positions are start, start + step, ...: as many as src has along dim (`end` is implied).
        count = sink.int_param(f"{name}_count", source_shapes[1][dim])
        first = sink.int_param(f"{name}_start", start)
        offset = sink.index_temp(ir.over(f"{index[dim]} - {first}", index[dim], first))
        taken = offset if step == 1 else sink.index_temp(ir.over(f"{offset} // {step}", offset))
        condition = f"({offset} >= 0) & ({taken} < {count})"
        if step != 1:
            condition += f" & ({offset} % {step} == 0)"
        clamped = sink.index_temp(ir.over(f"tl.minimum(tl.maximum({taken}, 0), {count} - 1)", taken, count))
        return [
            (ir.over(condition, offset, taken, count), 1, (*index[:dim], clamped, *index[dim + 1 :])),
            (None, 0, index),
        ]
    if kind == "cat":  # sources: the tensors, laid end to end along dim
        dim = _dim(args["dim"], len(out_shape))
        pieces, first = [], 0
        for number, shape in enumerate(source_shapes):
            if same(shape[dim] if len(shape) == len(out_shape) else 0, 0):
                continue  # an empty input (cat also takes a 1-d empty tensor of any other rank)
            start = sink.int_param(f"{name}_start{number}", first)
            size = sink.int_param(f"{name}_size{number}", shape[dim])
            offset = sink.index_temp(ir.over(f"{index[dim]} - {start}", index[dim], start))
            clamped = sink.index_temp(
                ir.over(f"tl.minimum(tl.maximum({offset}, 0), {size} - 1)", offset, size)
            )
            condition = ir.over(f"{offset} < {size}", offset, size)
            pieces.append((condition, number, (*index[:dim], clamped, *index[dim + 1 :])))
            first = first + shape[dim]
        if not pieces:
            return []  # every input is empty, so is the result: no element to read
        *tried, (_, number, last) = pieces
        return [*tried, (None, number, last)]
    raise NotImplementedError(f"scatter kind {kind!r} has no index mapping")


# An indexed op (`fuser.lower.ops.IndexedOp`, of rank 1 or more) maps an index through the values of its `index`
# tensor, which the kernel loads; these give the index arithmetic around those values.

# A scatter of a value compares each output element with at most this many positions along its dim.
MAX_POSITIONS = 8


def at_position(index: Index, dim: int, position: str) -> Index:
    """`index` with its entry along `dim` replaced by `position` (where a gather reads its source)."""
    return (*index[:dim], position, *index[dim + 1 :])


def scatter_positions(
    index: Index, dim: int, out_shape, positions_shape, sink: IndexSink, name: str
) -> tuple[ir.Expr | None, list[Index]]:
    """For output `index` of a scatter of a value along `dim`: the condition that `index` lies within the
    positions tensor's extent along the other dims (None: it always does), and where to read each position
    the element is compared with, one per entry along `dim`, clamped into the positions tensor."""
    inside, at = [], list(index)
    for d, size in enumerate(positions_shape):
        if d == dim or index[d] == "0" or same(size, out_shape[d]):
            continue
        bound = sink.int_param(f"{name}_positions{d}", size)
        inside.append(ir.over(f"({index[d]} < {bound})", index[d], bound))
        at[d] = sink.index_temp(ir.over(f"tl.minimum({index[d]}, {bound} - 1)", index[d], bound))
    reads = [at_position(tuple(at), dim, str(k)) for k in range(positions_shape[dim])]
    condition = ir.over(" & ".join(e.text for e in inside), *inside) if inside else None
    return condition, reads
