"""Specs of ops whose calls depend on the input's shape: views, normalizations and fallbacks.

Each spec's `args(x, make)` reads the shape of the sample's input `x` (already made in the sample's
layout and dtype) and returns the calls worth making on it, `[(args, kwargs), ...]`; `make` makes the
other operands, seeded like `x`. A call that does not apply to the shape is not made (a transpose of a
0-d tensor); a call eager rejects anyway (a `view` of a non-viewable layout) is dropped by the runner.

- views: the fuser lowers most of them to index arithmetic, so they get steps, negative and
  out-of-range bounds, size-1 and zero-size dims, and every layout.
- normalizations: layer, group and RMS norm with and without their affine parameters, over the last
  one and two dims and over long rows; and the backward ops autograd emits for them and for softmax.
- fallbacks: ops the fuser does not lower, which must still come out right around its kernels
  (including the ones core decompositions turn into index and gather arithmetic).

Index operands (gather, scatter, embedding) are seeded too, and where a duplicate index would make
eager's answer depend on the order of writes (scatter), each row's indices are distinct.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from conformance.specs import OpSpec, exact, shaped_spec
from conformance.specs.combine import mixed
from conformance.specs.values import DTYPES, FLOATING

ALL = tuple(DTYPES)
Calls = list[tuple[tuple, dict[str, Any]]]
EPS = 1e-5


def _positions(x: torch.Tensor) -> list[int]:
    """The first and the last dim (once, for a 1-d tensor); none for a 0-d tensor."""
    return sorted({0, x.dim() - 1}) if x.dim() else []


def _split(n: int) -> list[int]:
    """`n` as two factors (smallest prime first), or [n, 1] for a prime, 0 or 1."""
    factor = next((f for f in range(2, math.isqrt(n) + 1) if n % f == 0), n)
    return [factor, n // factor] if 1 < factor < n else [n, 1]


def _indices(size: int, shape, make, position: int) -> torch.Tensor:
    """Seeded int64 indices in [0, size) (duplicates allowed) of `shape`; empty where `size` is 0."""
    if size == 0:
        return torch.zeros([0] * len(shape), dtype=torch.int64)
    return make(shape, "int64", position=position, specials=False, domain=(0, size - 1))


def _distinct_indices(x: torch.Tensor, make, keep: int) -> torch.Tensor:
    """Along the last dim of x: the first `keep` of a seeded permutation of each row's indices."""
    keys = make(x.shape, "float64", position=3, specials=False)
    return keys.argsort(dim=-1).narrow(-1, 0, min(keep, x.shape[-1]))


# --- views ------------------------------------------------------------------------------------------


def _reshaped(x: torch.Tensor) -> list[list[int]]:
    """Sizes with x's element count: flat, reversed, a leading 1, the last dim split in two."""
    shape = list(x.shape)
    targets = [[-1], shape[::-1], [1, *shape]]
    if shape:
        targets.append([*shape[:-1], *_split(shape[-1])])
    return targets


def view_calls(x, make) -> Calls:
    return [((x, size), {}) for size in _reshaped(x)]


def permute_calls(x, make) -> Calls:
    dims = list(range(x.dim()))
    return [((x, dims[::-1]), {}), ((x, dims[1:] + dims[:1]), {})]


def transpose_calls(x, make) -> Calls:
    if x.dim() < 2:
        return []
    return [((x, 0, -1), {}), ((x, -1, -2), {})]


def t_calls(x, make) -> Calls:
    return [((x,), {})] if x.dim() <= 2 else []


def expand_calls(x, make) -> Calls:
    """A new leading dim, every size-1 dim widened, and -1 keeping a size."""
    widened = [4 if size == 1 else size for size in x.shape]
    return [((x, [2, *x.shape]), {}), ((x, widened), {}), ((x, [3] + [-1] * x.dim()), {})]


def unsqueeze_calls(x, make) -> Calls:
    return [((x, dim), {}) for dim in sorted({0, -1, x.dim() // 2})]


def _with_ones(x: torch.Tensor) -> torch.Tensor:
    """x with size-1 dims at the front and the back (a view: the layout is x's)."""
    return x.unsqueeze(0).unsqueeze(-1)


def squeeze_calls(x, make) -> Calls:
    return [((x,), {}), ((_with_ones(x),), {})]


def squeeze_dim_calls(x, make) -> Calls:
    return [((x, dim), {}) for dim in _positions(x)] + [((_with_ones(x), 0), {}), ((_with_ones(x), -1), {})]


def squeeze_dims_calls(x, make) -> Calls:
    return [((x, _positions(x)), {}), ((_with_ones(x), [0, -1]), {}), ((_with_ones(x), []), {})]


def slice_calls(x, make) -> Calls:
    """Steps, negative starts and ends, an end past the size, an empty and a reversed range (the first
    dim gets half of them and the last dim the other half; a 1-d tensor gets all of them)."""
    first = [(1, None, 2), (5, 2, 1)]
    last = [(-3, 10**6, 1), (None, -1, 3)]
    if x.dim() == 0:
        return []
    if x.dim() == 1:
        return [((x, 0, *bounds), {}) for bounds in first + last]
    return [((x, 0, *bounds), {}) for bounds in first] + [((x, -1, *bounds), {}) for bounds in last]


def select_calls(x, make) -> Calls:
    return [((x, dim, index), {}) for dim in _positions(x) for index in (0, -1)]


def narrow_calls(x, make) -> Calls:
    calls = []
    for dim in _positions(x):
        size = x.shape[dim]
        calls += [
            ((x, dim, size // 3, size - size // 3 - size // 4), {}),
            ((x, dim, -1 if size else 0, min(size, 1)), {}),
        ]
    return calls


def flatten_calls(x, make) -> Calls:
    calls = [((x,), {})]
    if x.dim() >= 2:
        calls += [((x, 1, -1), {}), ((x, 0, -2), {})]
    return calls


def unflatten_calls(x, make) -> Calls:
    calls = []
    for dim in _positions(x):
        size = x.shape[dim]
        calls += [((x, dim, _split(size)), {}), ((x, dim, [-1, 1]), {})]
    return calls


def movedim_calls(x, make) -> Calls:
    if x.dim() < 2:
        return [((x, 0, -1), {})] if x.dim() else []
    return [((x, 0, -1), {}), ((x, -1, 0), {})]


def alias_calls(x, make) -> Calls:
    return [((x,), {})]


def split_calls(x, make) -> Calls:
    """At most four pieces, the last one shorter where the size does not divide."""
    calls = []
    for dim in _positions(x):
        size = x.shape[dim]
        calls.append(((x, max(1, math.ceil(size / 3)), dim), {}))
        if size > 2:
            calls.append(((x, size - 1, dim), {}))
    return calls


def chunk_calls(x, make) -> Calls:
    return [((x, chunks, dim), {}) for dim in _positions(x) for chunks in (3, 2)]


def unbind_calls(x, make) -> Calls:
    return [((x, dim), {}) for dim in _positions(x) if x.shape[dim] <= 8]


def diagonal_calls(x, make) -> Calls:
    if x.dim() < 2:
        return []
    return [((x,), {}), ((x, 1), {}), ((x, -2, -1, 0), {})]


def expand_as_calls(x, make) -> Calls:
    widened = [4 if size == 1 else size for size in x.shape]
    return [((x, make([2, *x.shape], position=1)), {}), ((x, make(widened, position=1)), {})]


def view_as_calls(x, make) -> Calls:
    return [((x, make(size, position=1)), {}) for size in (list(x.shape)[::-1], [x.numel()])]


# --- normalizations ---------------------------------------------------------------------------------


def _normalized(x: torch.Tensor) -> list[list[int]]:
    """The last dim, and the last two dims, of a tensor with at least that many."""
    return [list(x.shape[x.dim() - k :]) for k in (1, 2) if x.dim() >= k]


def _affine(make, shape, weight: bool, bias: bool) -> tuple:
    """A weight and a bias of `shape`, or None for each one left out."""
    w = make(shape, position=1, specials=False) if weight else None
    b = make(shape, position=2, specials=False) if bias else None
    return w, b


# (weight, bias) per count of normalized dims: both and neither over one dim; the weight alone over two.
AFFINE = {1: ((True, True), (False, False)), 2: ((True, False),)}


def native_layer_norm_calls(x, make) -> Calls:
    calls = []
    for shape in _normalized(x):
        for weight, bias in AFFINE[len(shape)]:
            calls.append(((x, shape, *_affine(make, shape, weight, bias), EPS), {}))
    return calls


def layer_norm_calls(x, make) -> Calls:
    calls = []
    for shape in _normalized(x):
        for weight, bias in AFFINE[len(shape)]:
            w, b = _affine(make, shape, weight, bias)
            calls.append(((x, shape), {"weight": w, "bias": b, "eps": EPS}))
    return calls


def _groups(x: torch.Tensor) -> list[int]:
    """Group counts for an (N, C, *) input: one group, and the smallest split of C (or C itself)."""
    if x.dim() < 2 or x.shape[1] == 0:
        return []
    return sorted({1, _split(x.shape[1])[0]})


def native_group_norm_calls(x, make) -> Calls:
    calls = []
    for groups in _groups(x):
        n, c, hxw = x.shape[0], x.shape[1], math.prod(x.shape[2:])
        for weight, bias in AFFINE[1]:
            calls.append(((x, *_affine(make, [c], weight, bias), n, c, hxw, groups, EPS), {}))
    return calls


def group_norm_calls(x, make) -> Calls:
    calls = []
    for groups in _groups(x):
        for weight, bias in AFFINE[1]:
            w, b = _affine(make, [x.shape[1]], weight, bias)
            calls.append(((x, groups), {"weight": w, "bias": b, "eps": EPS}))
    return calls


def _rms_choices(x, make) -> list[tuple]:
    """(normalized shape, weight, eps): a weight with the default eps, and no weight with an eps."""
    choices = []
    for shape in _normalized(x):
        choices += [(shape, make(shape, position=1, specials=False), None), (shape, None, 1e-6)]
    return choices


def rms_norm_calls(x, make) -> Calls:
    return [((x, shape), {"weight": weight, "eps": eps}) for shape, weight, eps in _rms_choices(x, make)]


def fused_rms_norm_calls(x, make) -> Calls:
    return [((x, shape, weight, eps), {}) for shape, weight, eps in _rms_choices(x, make)]


def native_layer_norm_backward_calls(x, make) -> Calls:
    """The backward of each `native_layer_norm_calls` call, with the mean and rstd eager saves."""
    if not x.dtype.is_floating_point:
        return []
    calls = []
    for (_, shape, w, b, eps), _kwargs in native_layer_norm_calls(x, make):
        with torch.no_grad():
            _, mean, rstd = torch.ops.aten.native_layer_norm(x, shape, w, b, eps)
        grad = make(x.shape, position=4, specials=False)
        calls.append(((grad, x, shape, mean, rstd, w, b, [True, w is not None, b is not None]), {}))
    return calls


def native_group_norm_backward_calls(x, make) -> Calls:
    """The backward of each `native_group_norm_calls` call, with the mean and rstd eager saves. Only for a
    contiguous input: the forward op rejects any other, and eager's CPU backward reads its input as
    contiguous without checking (an expanded input gives a different answer on every run)."""
    if not x.dtype.is_floating_point or not x.is_contiguous():
        return []
    calls = []
    for (_, w, b, n, c, hxw, groups, eps), _kwargs in native_group_norm_calls(x, make):
        with torch.no_grad():
            _, mean, rstd = torch.ops.aten.native_group_norm(x, w, b, n, c, hxw, groups, eps)
        grad = make(x.shape, position=4, specials=False)
        mask = [True, w is not None, b is not None]
        calls.append(((grad, x, mean, rstd, w, n, c, hxw, groups, mask), {}))
    return calls


def _softmax_backward_calls(forward: Callable) -> Callable:
    """Calls of a softmax backward op: an upstream gradient and the forward's output, per dim."""

    def calls(x, make) -> Calls:
        if not x.dtype.is_floating_point:
            return []
        found = []
        for dim in _positions(x) or [0]:
            with torch.no_grad():
                output = forward(x, dim, False)
            grad = make(x.shape, position=1, specials=False)
            found.append(((grad, output, dim, x.dtype), {}))
        return found

    return calls


# --- fallbacks --------------------------------------------------------------------------------------


def mm_calls(x, make) -> Calls:
    if x.dim() != 2:
        return []
    m, k = x.shape
    return [((x, make((k, 5), position=1)), {}), ((make((3, m), position=1), x), {})]


def bmm_calls(x, make) -> Calls:
    batch = x if x.dim() == 3 else x.unsqueeze(0) if x.dim() == 2 else None
    if batch is None:
        return []
    b, _, k = batch.shape
    return [((batch, make((b, k, 3), position=1)), {})]


def addmm_calls(x, make) -> Calls:
    if x.dim() != 2:
        return []
    m, k = x.shape
    return [
        ((make((5,), position=2), x, make((k, 5), position=1)), {}),
        ((make((m, 1), position=2), x, make((k, 2), position=1)), {"beta": 0.5, "alpha": -2}),
    ]


def cat_calls(x, make) -> Calls:
    """Equal shapes along each end dim, a different size along dim 0, and a promoting partner."""
    if x.dim() == 0:
        return []
    calls = [(([x, make(x.shape, position=1)], dim), {}) for dim in _positions(x)]
    calls.append((([x, make((2, *x.shape[1:]), position=1), x], 0), {}))
    calls.append((([x, make(x.shape, "int32", position=2)], -1), {}))
    return calls


def stack_calls(x, make) -> Calls:
    return [(([x, make(x.shape, position=1)], dim), {}) for dim in (0, -1)]


def cumulative_calls(x, make) -> Calls:
    return [((x, dim), {}) for dim in _positions(x) or [0]]


def flip_calls(x, make) -> Calls:
    if x.dim() == 0:
        return [((x, []), {})]
    return [((x, dims), {}) for dims in ([0], [-1], [0, -1])[: 3 if x.dim() >= 2 else 1]]


def roll_calls(x, make) -> Calls:
    calls = [((x, [-3], []), {})]
    if x.dim():
        calls.append(((x, [2], [0]), {}))
    if x.dim() >= 2:
        calls.append(((x, [1, -9], [0, -1]), {}))
    return calls


def triangle_calls(x, make) -> Calls:
    return [((x, diagonal), {}) for diagonal in (0, 1, -2)] if x.dim() >= 2 else []


def index_select_calls(x, make) -> Calls:
    calls = []
    if x.dim() == 0:
        return [((x, 0, torch.tensor([0])), {})]
    for dim in _positions(x):
        size = x.shape[dim]
        index = torch.tensor([size - 1, 0, 0, size // 2] if size else [], dtype=torch.int64)
        calls.append(((x, dim, index), {}))
    return calls


def gather_calls(x, make) -> Calls:
    calls = []
    for dim in _positions(x):
        shape = list(x.shape)
        shape[dim] = 5 if x.shape[dim] else 0
        calls.append(((x, dim, _indices(x.shape[dim], shape, make, 1)), {}))
    return calls


def constant_pad_calls(x, make) -> Calls:
    if x.dim() == 0:
        return []
    calls = [((x, [1, 2]), {}), ((x, [-1, 1]), {"value": 3})]
    if x.dim() >= 2:
        calls.append(((x, [0, 0, 2, 1]), {"value": -2}))
    return calls


def repeat_calls(x, make) -> Calls:
    return [((x, [2] * x.dim()), {}), ((x, [3] + [1] * x.dim()), {})]


def sort_calls(x, make) -> Calls:
    return [((x,), {"dim": dim}) for dim in _positions(x) or [0]]


def embedding_calls(x, make) -> Calls:
    if x.dim() != 2:
        return []
    indices = _indices(x.shape[0], (4, 3), make, 1)
    return [((x, indices), {}), ((x, indices), {"padding_idx": 0})] if x.shape[0] else [((x, indices), {})]


def scatter_calls(x, make) -> Calls:
    if x.dim() == 0:
        return []
    index = _distinct_indices(x, make, keep=4)
    return [((x, -1, index, make(index.shape, position=1)), {})]


def scatter_add_calls(x, make) -> Calls:
    """Duplicate indices: scatter_add accumulates them (CPU eager adds in index order)."""
    if x.dim() == 0:
        return []
    shape = [*x.shape[:-1], 6 if x.shape[-1] else 0]
    index = _indices(x.shape[-1], shape, make, 2)
    return [((x, -1, index, make(shape, position=1)), {})]


def index_add_calls(x, make) -> Calls:
    if x.dim() == 0:
        return []
    index = _indices(x.shape[0], (5,), make, 2)
    source = make((index.numel(), *x.shape[1:]), position=1)
    return [((x, 0, index, source), {}), ((x, 0, index, source), {"alpha": 2})]


def where_scalar_calls(scalar_first: bool) -> Callable:
    """Calls of where with one Python scalar operand: a full mask and a broadcast one, an int and a float
    scalar (the float one promotes an integer tensor)."""

    def calls(x, make) -> Calls:
        found = []
        for mask_shape, scalar in ((x.shape, 3), (x.shape[-1:], -2.5)):
            mask = make(mask_shape, "bool", position=1)
            found.append(((mask, scalar, x) if scalar_first else (mask, x, scalar), {}))
        return found

    return calls


def diag_embed_calls(x, make) -> Calls:
    if x.dim() == 0 or x.numel() > 4096:
        return []
    return [((x,), {}), ((x, -1, 0, -1), {})]


def shaped_specs() -> list[OpSpec]:
    view = "view"
    norm = "normalization"
    fallback = "fallback"
    sort_variants = ({"stable": True}, {"stable": True, "descending": True})
    return [
        shaped_spec("view.default", view, view_calls),
        shaped_spec("_unsafe_view.default", view, view_calls),
        shaped_spec("reshape.default", view, view_calls),
        shaped_spec("permute.default", view, permute_calls),
        shaped_spec("transpose.int", view, transpose_calls),
        shaped_spec("t.default", view, t_calls),
        shaped_spec("expand.default", view, expand_calls),
        shaped_spec("unsqueeze.default", view, unsqueeze_calls),
        shaped_spec("squeeze.default", view, squeeze_calls),
        shaped_spec("squeeze.dim", view, squeeze_dim_calls),
        shaped_spec("squeeze.dims", view, squeeze_dims_calls),
        shaped_spec("slice.Tensor", view, slice_calls),
        shaped_spec("select.int", view, select_calls),
        shaped_spec("narrow.default", view, narrow_calls),
        shaped_spec("flatten.using_ints", view, flatten_calls),
        shaped_spec("unflatten.int", view, unflatten_calls),
        shaped_spec("movedim.int", view, movedim_calls),
        shaped_spec("alias.default", view, alias_calls),
        shaped_spec("split.Tensor", view, split_calls),
        shaped_spec("chunk.default", view, chunk_calls),
        shaped_spec("unbind.int", view, unbind_calls),
        shaped_spec("diagonal.default", view, diagonal_calls),
        shaped_spec("expand_as.default", view, expand_as_calls),
        shaped_spec("view_as.default", view, view_as_calls),
        shaped_spec("native_layer_norm.default", norm, native_layer_norm_calls, dtypes=FLOATING),
        shaped_spec("layer_norm.default", norm, layer_norm_calls, dtypes=FLOATING),
        shaped_spec(
            "native_group_norm.default",
            norm,
            native_group_norm_calls,
            dtypes=FLOATING,
            reference=exact.native_group_norm,  # eager's running mean is not exact in float64
        ),
        shaped_spec("group_norm.default", norm, group_norm_calls, dtypes=FLOATING),
        shaped_spec("rms_norm.default", norm, rms_norm_calls, dtypes=FLOATING),
        shaped_spec("_fused_rms_norm.default", norm, fused_rms_norm_calls, dtypes=FLOATING),
        # Their backward ops, with samples of their own (their inputs are what the forward op saved).
        *(
            shaped_spec(op, norm, calls, dtypes=FLOATING, differentiable=False)
            for op, calls in (
                ("native_layer_norm_backward.default", native_layer_norm_backward_calls),
                ("native_group_norm_backward.default", native_group_norm_backward_calls),
                ("_softmax_backward_data.default", _softmax_backward_calls(torch.ops.aten._softmax)),
                ("_log_softmax_backward_data.default", _softmax_backward_calls(torch.ops.aten._log_softmax)),
            )
        ),
        shaped_spec("mm.default", fallback, mm_calls),
        shaped_spec("bmm.default", fallback, bmm_calls),
        shaped_spec("addmm.default", fallback, addmm_calls),
        shaped_spec("cat.default", fallback, cat_calls),
        shaped_spec("stack.default", fallback, stack_calls),
        shaped_spec("cumsum.default", fallback, cumulative_calls),
        shaped_spec("cumprod.default", fallback, cumulative_calls),
        shaped_spec("logcumsumexp.default", fallback, cumulative_calls, dtypes=FLOATING),
        shaped_spec("flip.default", fallback, flip_calls),
        shaped_spec("roll.default", fallback, roll_calls),
        shaped_spec("tril.default", fallback, triangle_calls),
        shaped_spec("triu.default", fallback, triangle_calls),
        shaped_spec("index_select.default", fallback, index_select_calls),
        shaped_spec("gather.default", fallback, gather_calls),
        shaped_spec("constant_pad_nd.default", fallback, constant_pad_calls),
        shaped_spec("repeat.default", fallback, repeat_calls),
        shaped_spec("sort.stable", fallback, sort_calls, variants=sort_variants),
        shaped_spec("argsort.stable", fallback, sort_calls, variants=sort_variants, differentiable=False),
        shaped_spec("embedding.default", fallback, embedding_calls),
        shaped_spec("scatter.src", fallback, scatter_calls),
        shaped_spec("scatter_add.default", fallback, scatter_add_calls),
        shaped_spec("index_add.default", fallback, index_add_calls),
        shaped_spec("diag_embed.default", fallback, diag_embed_calls),
        # The Python scalar fills where the mask says: combined with x, as a fill (conformance/specs/combine.py).
        shaped_spec("where.ScalarOther", fallback, where_scalar_calls(scalar_first=False), combine=mixed),
        shaped_spec("where.ScalarSelf", fallback, where_scalar_calls(scalar_first=True), combine=mixed),
    ]
