"""NumPy reductions for the fuser's own combine functions under Triton's interpreter.

The interpreter reduces with NumPy only when `tl.reduce` is given one of Triton's own combine functions;
with any other it calls the combine function once per element, in Python, so a block of 4096 elements
is 4096 calls and a reduction-heavy conformance case runs for most of a minute. The fuser's combine
functions (nan-propagating max and min, product, argmax and argmin that pick nan and then the first
index) get NumPy versions with the same semantics here. `install` routes the interpreter's reduce to
them when the combine function carries one (`numpy_reduce`, set by fuser.runtime); every other reduce,
and any on bfloat16 blocks (which the interpreter holds as raw bits), goes the interpreter's own way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import triton.language as tl

Reduce = Callable[[tuple[np.ndarray, ...], int, bool], tuple[np.ndarray, ...]]


def _ufunc(ufunc: np.ufunc) -> Reduce:
    def reduce(arrays, axis, keep_dims):
        with np.errstate(all="ignore"):
            return (ufunc.reduce(arrays[0], axis=axis, keepdims=keep_dims),)

    return reduce


def _arg(pick: Callable, fill: float) -> Reduce:
    """Argmax (pick=np.max) or argmin (np.min) of (values, indices): nan wins, then the smallest index."""

    def reduce(arrays, axis, keep_dims):
        values, indices = arrays
        if values.dtype.kind == "f":
            nan = np.isnan(values)
            row_has_nan = nan.any(axis=axis, keepdims=True)
            best = pick(np.where(nan, fill, values), axis=axis, keepdims=True)
            best = np.where(row_has_nan, values.dtype.type(np.nan), best)
            chosen = np.where(row_has_nan, nan, values == best)
        else:  # integers and bools: compared as themselves, never through a float
            best = pick(values, axis=axis, keepdims=True)
            chosen = values == best
        index = np.where(chosen, indices, np.iinfo(indices.dtype).max).min(axis=axis, keepdims=True)
        if not keep_dims:
            best, index = best.squeeze(axis), index.squeeze(axis)
        return best, index

    return reduce


maximum_nan = _ufunc(np.maximum)  # tl.maximum(..., propagate_nan=ALL) is np.maximum in the interpreter
minimum_nan = _ufunc(np.minimum)
maximum = _ufunc(np.fmax)  # and without propagation, np.fmax
minimum = _ufunc(np.fmin)
multiply = _ufunc(np.multiply)
argmax = _arg(np.max, -np.inf)
argmin = _arg(np.min, np.inf)


def install() -> None:
    """Teach the interpreter's reduce to use a combine function's `numpy_reduce` (once per process)."""
    from triton.runtime import interpreter

    ops = getattr(interpreter, "ReduceOps", None)
    if ops is None or getattr(ops.apply_impl, "fuser_numpy_reduce", False):
        return
    original = ops.apply_impl

    def apply_impl(self, input):
        reduce = getattr(self.combine_fn, "numpy_reduce", None)
        if reduce is None or self.axis is None or any(t.dtype == tl.bfloat16 for t in input):
            return original(self, input)
        results = reduce(tuple(t.handle.data for t in input), self.axis, self.keep_dims)
        return tuple(self.to_tensor(r, t.dtype) for r, t in zip(results, input, strict=True))

    apply_impl.fuser_numpy_reduce = True
    ops.apply_impl = apply_impl
