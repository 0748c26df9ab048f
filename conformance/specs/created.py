"""Specs of ops that create tensors inside the program: ranges, fills, identities, triangle indices.

Each call is sized by the sample's input `x` (its last dim, its shape), made in the case's dtype, and
combined with `x` by the spec's `combine` (`conformance/specs/combine.py`): a created tensor is only wrong
where a kernel combines it with other values, and combining it with an input keeps a backend from
folding it into a constant. The float64 reference runs the op as it is (its rounding to its dtype is
what the op means: arange(0, 6.4, 0.1) in bfloat16 holds bfloat16 values) and the combination in
float64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.specs import OpSpec, shaped_spec
from conformance.specs.combine import filled, gathered, masked, mixed, outer
from conformance.specs.values import DTYPES

ALL = tuple(DTYPES)
Calls = list[tuple[tuple, dict[str, Any]]]


def _created(
    op: str, args: Callable, combine: Callable = mixed, *, dtypes: tuple[str, ...] = ALL, **fields
) -> OpSpec:
    return shaped_spec(op, fields.pop("category", "created"), args, dtypes=dtypes, combine=combine, **fields)


def _on(x) -> dict[str, Any]:
    """Made in x's dtype on x's device."""
    return {"dtype": x.dtype, "device": x.device}


def _last(x) -> int | None:
    return x.shape[-1] if x.dim() else None


def arange_calls(x, make) -> Calls:
    n = _last(x)
    return [((n,), _on(x))] if n is not None else []


def arange_start_calls(x, make) -> Calls:
    n = _last(x)
    return [((-3, n - 3), _on(x)), ((0.5, n + 0.5), _on(x))] if n is not None else []


def arange_step_calls(x, make) -> Calls:
    """Steps that no half dtype holds exactly (0.1), a negative step, and an integer step; each end is
    half a step past the last value, so the length is n whatever the rounding of (end - start) / step.
    Fractional steps only in floating dtypes: in an integer dtype eager truncates the step to 0 and then
    differs by device (the CPU repeats the start; CUDA dies of SIGFPE, torch 2.11, docs/conformance.md)."""
    n = _last(x)
    if n is None:
        return []
    steps = [(0.0, 0.1), (2.5, -0.3), (-7, 3)] if x.is_floating_point() else [(-7, 3), (40, -2)]
    return [((start, start + step * (n - 0.5), step), _on(x)) for start, step in steps]


def linspace_calls(x, make) -> Calls:
    """Fractional ends (eager computes in float and truncates for an integer dtype), a descending range,
    and ends the dtype holds exactly."""
    n = _last(x)
    if n is None:
        return []
    ends = [(-3.3, 7.9), (10, -10), (0, n - 1)]
    return [((start, end, n), _on(x)) for start, end in ends]


def logspace_calls(x, make) -> Calls:
    n = _last(x)
    if n is None:
        return []
    return [((-2, 2, n), _on(x)), ((0, 6.5, n), {"base": 2.0, **_on(x)})]


FILLS = (0.1, -2.5, 3, 1e30)  # inexact in every half dtype, exact, an integer, past float16's range


def full_calls(x, make) -> Calls:
    return [((list(x.shape), value), _on(x)) for value in FILLS]


def sized_calls(x, make) -> Calls:
    """zeros, ones and empty: x's shape and its last dim."""
    sizes = [list(x.shape)] + ([list(x.shape[-1:])] if x.dim() else [])
    return [((size,), _on(x)) for size in sizes]


def like_calls(x, make) -> Calls:
    return [((x,), {})]


def new_sized_calls(x, make) -> Calls:
    return [((x, list(x.shape)), {})]


SQUARE = 256  # the largest n of an (n, n) result combined with x's (..., n): (3, 20000) would need 1.2e9


def _square(x) -> int | None:
    n = _last(x)
    return n if n is not None and n <= SQUARE else None


def new_square_calls(x, make) -> Calls:
    """An (n, n) tensor of x's last dim: the size of a causal mask over a sequence of n."""
    n = _square(x)
    return [((x, [n, n]), {})] if n is not None else []


def new_full_calls(x, make) -> Calls:
    return [((x, list(x.shape), value), {}) for value in FILLS]


def strided_calls(x, make) -> Calls:
    """A transposed (column-major) layout of x's shape."""
    if x.dim() < 2:
        return []
    shape = list(x.shape)
    strides = [1] * len(shape)
    for dim in range(1, len(shape)):
        strides[dim] = strides[dim - 1] * shape[dim - 1]
    return [((shape, strides), _on(x))]


def new_strided_calls(x, make) -> Calls:
    return [((x, *args), {}) for args, _ in strided_calls(x, make)]


def scalar_tensor_calls(x, make) -> Calls:
    return [((value,), _on(x)) for value in FILLS]


def fill_scalar_calls(x, make) -> Calls:
    return [((x, value), {}) for value in FILLS]


def fill_tensor_calls(x, make) -> Calls:
    """A 0-d value of another dtype (float64 holds 0.1 exactly: the fill rounds it to x's dtype)."""
    return [((x, make((), "float64", position=1)), {}), ((x, make((), "int64", position=2)), {})]


def eye_calls(x, make) -> Calls:
    n = _square(x)
    return [((n,), _on(x))] if n is not None else []


def eye_m_calls(x, make) -> Calls:
    return [((x.shape[-2], x.shape[-1]), _on(x))] if x.dim() >= 2 else []


def triangle_indices_calls(x, make) -> Calls:
    """Indices of x's last two dims, on, above and below the diagonal."""
    if x.dim() < 2:
        return []
    rows, cols = x.shape[-2:]
    return [((rows, cols, offset), {"device": x.device}) for offset in (0, 1, -2)]


def created_specs() -> list[OpSpec]:
    return [
        _created("arange.default", arange_calls),
        _created("arange.start", arange_start_calls),
        _created("arange.start_step", arange_step_calls),
        _created("linspace.default", linspace_calls),
        _created("logspace.default", logspace_calls),
        _created("full.default", full_calls),
        _created("zeros.default", sized_calls),
        _created("ones.default", sized_calls),
        _created("empty.memory_format", sized_calls, filled),
        _created("empty_strided.default", strided_calls, filled),
        _created("zeros_like.default", like_calls),
        _created("ones_like.default", like_calls),
        _created("empty_like.default", like_calls, filled),
        _created("new_zeros.default", new_sized_calls),
        _created("new_ones.default", new_square_calls, masked),
        _created("new_full.default", new_full_calls),
        _created("new_empty.default", new_sized_calls, filled),
        _created("new_empty_strided.default", new_strided_calls, filled),
        _created("zero.default", like_calls),
        _created("scalar_tensor.default", scalar_tensor_calls),
        _created("fill.Scalar", fill_scalar_calls),
        _created("fill.Tensor", fill_tensor_calls),
        _created("eye.default", eye_calls, outer),
        _created("eye.m", eye_m_calls),
        _created("tril_indices.default", triangle_indices_calls, gathered),
        _created("triu_indices.default", triangle_indices_calls, gathered),
        # In-place twins: x itself is filled (its values are gone; the combination reads the fill).
        _created("fill_.Scalar", fill_scalar_calls, category="inplace", differentiable=False),
        _created("fill_.Tensor", fill_tensor_calls, category="inplace", differentiable=False),
        _created("zero_.default", like_calls, category="inplace", differentiable=False),
    ]
