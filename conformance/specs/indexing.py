"""Specs of indexing ops: reads and writes at computed positions.

Index operands are seeded. Where duplicate indices make eager's answer depend on the order of writes
(index_put and index_copy without accumulation, scatter of values), each index is distinct; where the
op accumulates (index_put with accumulate, scatter with a reduction, put with accumulate) duplicates
are the point, and there are some. Boolean-mask indexing has a data-dependent shape: a backend may
leave it to eager behind a graph break (torch.compile's default), but its answer must be eager's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.specs import OpSpec, shaped_spec
from conformance.specs.shaped import _distinct_indices, _indices, _positions
from conformance.specs.values import DTYPES, FLOATING

ALL = tuple(DTYPES)
Calls = list[tuple[tuple, dict[str, Any]]]


def _indexing(op: str, args: Callable, *, dtypes: tuple[str, ...] = ALL, **fields) -> OpSpec:
    return shaped_spec(op, fields.pop("category", "indexing"), args, dtypes=dtypes, **fields)


def _rows(x: torch.Tensor, make, count: int, *, distinct: bool, position: int = 1) -> torch.Tensor | None:
    """`count` indices into x's first dim (negative ones included), distinct or with repeats."""
    if x.dim() == 0 or x.shape[0] == 0:
        return None
    size = x.shape[0]
    if distinct:
        keys = make((size,), "float64", position=position, specials=False)
        picked = keys.argsort()[: min(count, size)]
    else:
        picked = _indices(size, (count,), make, position)
    return torch.where(picked % 3 == 1, picked - size, picked)  # some as negative indices


def index_put_calls(x, make) -> Calls:
    """Distinct rows written with full values, a broadcast row and a 0-d value; repeated rows accumulated
    (each repeat adds); a second index tensor picking single elements."""
    distinct, repeated = _rows(x, make, 4, distinct=True), _rows(x, make, 6, distinct=False, position=2)
    if distinct is None:
        return []
    rest = tuple(x.shape[1:])
    calls = [
        ((x, [distinct], make((distinct.numel(), *rest), position=3)), {}),
        ((x, [distinct], make(rest[-1:], position=3)), {}),
        ((x, [repeated], make((), position=3)), {"accumulate": True}),
        ((x, [repeated], make((repeated.numel(), *rest), position=4)), {"accumulate": True}),
    ]
    if x.dim() >= 2 and x.shape[1]:
        columns = _indices(x.shape[1], (distinct.numel(),), make, 5)
        calls.append(((x, [distinct, columns], make((distinct.numel(),), position=3)), {}))
    return calls


def index_calls(x, make) -> Calls:
    """Rows (repeats and negatives), rows and columns together, a None skipping a dim, and bool masks
    (their calls sit behind a graph break; the others reach the backend)."""
    rows = _rows(x, make, 6, distinct=False)
    if rows is None:
        return []
    calls = [((x, [rows]), {}), *bool_index_calls(x, make)]
    if x.dim() >= 2 and x.shape[1]:
        columns = _indices(x.shape[1], (6,), make, 2)
        calls += [((x, [rows, columns]), {}), ((x, [None, columns]), {})]
    return calls


def bool_index_calls(x, make) -> Calls:
    if x.dim() == 0:
        return []
    return [
        ((x, [make(x.shape[:1], "bool", position=1)]), {}),
        ((x, [make(x.shape, "bool", position=2)]), {}),
    ]


def masked_scatter_calls(x, make) -> Calls:
    """A full mask and a broadcast one; the source has exactly as many elements as x (enough for any mask)."""
    source = make((x.numel(),), position=2)
    calls = [((x, make(x.shape, "bool", position=1), source), {})]
    if x.dim():
        calls.append(((x, make(x.shape[-1:], "bool", position=3), source), {}))
    return calls


def masked_select_calls(x, make) -> Calls:
    return [((x, make(x.shape, "bool", position=1)), {})]


def index_copy_calls(x, make) -> Calls:
    calls = []
    for dim in _positions(x):
        moved = x.movedim(dim, 0)
        index = _rows(moved, make, 3, distinct=True)
        if index is not None:
            index = index % moved.shape[0]  # index_copy takes no negative indices
            shape = list(x.shape)
            shape[dim] = index.numel()
            calls.append(((x, dim, index, make(shape, position=2)), {}))
    return calls


def index_fill_calls(value: Callable) -> Callable:
    def calls(x, make) -> Calls:
        found = []
        for dim in _positions(x) or [0]:
            size = x.shape[dim] if x.dim() else 1
            index = _indices(size, (3,), make, 1)
            found.append(((x, dim, index, value(make)), {}))
        return found

    return calls


def scatter_value_calls(x, make) -> Calls:
    if x.dim() == 0:
        return []
    index = _distinct_indices(x, make, keep=3)
    return [((x, -1, index, 0.1), {}), ((x, -1, index, -2), {})]


def _repeated_last(x, make, count: int = 5) -> torch.Tensor | None:
    if x.dim() == 0:
        return None
    shape = [*x.shape[:-1], count if x.shape[-1] else 0]
    return _indices(x.shape[-1], shape, make, 2)


def scatter_reduce_src_calls(x, make) -> Calls:
    index = _repeated_last(x, make)
    if index is None:
        return []
    source = make(index.shape, position=1)
    return [((x, -1, index, source), {"reduce": reduce}) for reduce in ("add", "multiply")]


def scatter_value_reduce_calls(x, make) -> Calls:
    index = _repeated_last(x, make)
    if index is None:
        return []
    return [((x, -1, index, 2), {"reduce": reduce}) for reduce in ("add", "multiply")]


def scatter_reduce_two_calls(x, make) -> Calls:
    """Every reduction, with and without x's own values (repeated indices reduce together)."""
    index = _repeated_last(x, make)
    if index is None:
        return []
    source = make(index.shape, position=1)
    reductions = ("sum", "prod", "mean", "amax", "amin")
    return [
        ((x, -1, index, source, reduce), {"include_self": include})
        for k, reduce in enumerate(reductions)
        for include in ((True, False) if k % 2 == 0 else (False,))
    ]


def index_reduce_calls(x, make) -> Calls:
    if x.dim() == 0 or x.shape[0] == 0:
        return []
    index = _indices(x.shape[0], (6,), make, 2)
    source = make((6, *x.shape[1:]), position=1)
    return [
        ((x, 0, index, source, reduce), {"include_self": k % 2 == 0})
        for k, reduce in enumerate(("prod", "mean", "amax", "amin"))
    ]


def take_along_dim_calls(x, make) -> Calls:
    calls = []
    for dim in _positions(x):
        shape = list(x.shape)
        shape[dim] = 4 if x.shape[dim] else 0
        calls.append(((x, _indices(x.shape[dim], shape, make, 1)), {"dim": dim}))
    return calls


def take_calls(x, make) -> Calls:
    if x.numel() == 0:
        return []
    index = _indices(x.numel(), (3, 4), make, 1)
    return [((x, index - x.numel() * (index % 2)), {})]  # every other index counted from the end


def put_calls(x, make) -> Calls:
    if x.numel() == 0:
        return []
    distinct = make((x.numel(),), "float64", position=1, specials=False).argsort()[:5]
    repeated = _indices(x.numel(), (7,), make, 2)
    return [
        ((x, distinct, make((distinct.numel(),), position=3)), {}),
        ((x, repeated, make((7,), position=4)), {"accumulate": True}),
    ]


def select_scatter_calls(x, make) -> Calls:
    calls = []
    for dim in _positions(x):
        if x.shape[dim]:
            shape = [s for d, s in enumerate(x.shape) if d != dim]
            calls.append(((x, make(shape, position=1), dim, -1), {}))
    return calls


# (start, end, step) of slice_scatter's region: to the end; stopping short of it (a region that ends
# inside the dim, where an off-by-one at its far edge shows); from the end, by 3, with no end.
SCATTER_REGIONS = ((1, None, 2), (0, -1, 1), (-4, None, 3))


def slice_scatter_calls(x, make) -> Calls:
    calls = []
    for dim in _positions(x):
        for start, end, step in SCATTER_REGIONS:
            shape = list(x.shape)
            shape[dim] = len(range(*slice(start, end, step).indices(x.shape[dim])))
            kwargs = {"dim": dim, "start": start, "end": end, "step": step}
            calls.append(((x, make(shape, position=1)), kwargs))
    return calls


def diagonal_scatter_calls(x, make) -> Calls:
    if x.dim() < 2:
        return []
    calls = []
    for offset in (0, 1, -2):
        shape = list(torch.diagonal(x, offset).shape)
        calls.append(((x, make(shape, position=1), offset), {}))
    return calls


def embedding_backward_calls(x, make) -> Calls:
    """x as the gradient of an embedding lookup: (indices..., dim) rows into a table of 9, with a padding
    index (its row gets no gradient) and counted by frequency."""
    if x.dim() < 2 or not x.dtype.is_floating_point:
        return []
    indices = _indices(9, x.shape[:-1], make, 1)
    return [((x, indices, 9, 2, False), {}), ((x, indices, 9, -1, True), {})]


def nonzero_calls(x, make) -> Calls:
    return [((x,), {})]


def indexing_specs() -> list[OpSpec]:
    data_dependent = (
        "its result's shape depends on the data: torch.compile leaves it to eager behind a graph break"
    )
    return [
        _indexing("index_put.default", index_put_calls),
        _indexing("_unsafe_index_put.default", index_put_calls),
        _indexing("index.Tensor", index_calls),
        _indexing("_unsafe_index.Tensor", index_calls),
        _indexing("masked_scatter.default", masked_scatter_calls),
        _indexing("masked_select.default", masked_select_calls, graph_break_reason=data_dependent),
        _indexing("nonzero.default", nonzero_calls, differentiable=False, graph_break_reason=data_dependent),
        _indexing("index_copy.default", index_copy_calls),
        _indexing("index_fill.int_Scalar", index_fill_calls(lambda make: -2.5)),
        _indexing("index_fill.int_Tensor", index_fill_calls(lambda make: make((), "float64", position=2))),
        _indexing("scatter.value", scatter_value_calls),
        # Autograd has no derivative for scatter with `reduce`: forward only.
        _indexing("scatter.reduce", scatter_reduce_src_calls, differentiable=False),
        _indexing("scatter.value_reduce", scatter_value_reduce_calls, differentiable=False),
        _indexing("scatter_reduce.two", scatter_reduce_two_calls),
        _indexing("index_reduce.default", index_reduce_calls),
        _indexing("take_along_dim.default", take_along_dim_calls),
        _indexing("take.default", take_calls),
        _indexing("put.default", put_calls),
        _indexing("select_scatter.default", select_scatter_calls),
        _indexing("slice_scatter.default", slice_scatter_calls),
        _indexing("diagonal_scatter.default", diagonal_scatter_calls),
        _indexing(
            "embedding_dense_backward.default",
            embedding_backward_calls,
            dtypes=FLOATING,
            differentiable=False,
        ),
        # In-place twins.
        _indexing("index_put_.default", index_put_calls, category="inplace", differentiable=False),
        _indexing("masked_scatter_.default", masked_scatter_calls, category="inplace", differentiable=False),
        _indexing("index_copy_.default", index_copy_calls, category="inplace", differentiable=False),
        _indexing(
            "index_fill_.int_Scalar",
            index_fill_calls(lambda make: -2.5),
            category="inplace",
            differentiable=False,
        ),
        _indexing("put_.default", put_calls, category="inplace", differentiable=False),
    ]
