"""Specs of reductions and softmax-like normalizations, whose samples the `reduction` family makes.

The generator reads each op's `dim` and `keepdim` arguments from its schema, so a spec here says only
what the schema cannot: which dtypes make sense, which attribute values to try (the variants: a
`dtype` to accumulate in, a `correction`, an `ord`), and whether autograd has a formula. Arguments
without a default (`_softmax`'s `half_to_float`, `norm`'s `p`) are pinned by every variant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.specs import OpSpec, exact, spec
from conformance.specs.values import DTYPES, FLOATING, inf

ALL = tuple(DTYPES)
# Float-valued ops that promote integer inputs (eager drops the dtypes it rejects).
PROMOTING = (*FLOATING, "int32", "bool")


def _reduction(
    op: str,
    *,
    dtypes: tuple[str, ...],
    differentiable: bool,
    variants: tuple[dict[str, Any], ...] = ({},),
    category: str = "reduction",
    cast_safe: bool = False,
    reference: Callable | None = None,
) -> OpSpec:
    return spec(
        f"aten.{op}",
        family="reduction",
        category=category,
        dtypes=dtypes,
        differentiable=differentiable,
        variants=variants,
        cast_safe=cast_safe,
        reference=reference,
    )


def reduction_specs() -> list[OpSpec]:
    # A wider accumulator: integer ones for sums (exact, so the order of the sum does not matter; a
    # float one would not be: int64's limits cast to float32 cancel differently in every order), float32
    # for the means and softmaxes of half inputs.
    upcast = ({}, {"dtype": torch.float32})
    softmax_pinned = ({"half_to_float": False},)
    corrections = ({}, {"correction": 0}, {"correction": 2})
    return [
        # Sums and products; an explicit dtype casts the input before accumulating (cast_safe keeps the
        # float-to-integer casts defined).
        _reduction(
            "sum.default",
            dtypes=ALL,
            differentiable=True,
            variants=({}, {"dtype": torch.int64}),
            cast_safe=True,
        ),
        _reduction(
            "sum.dim_IntList",
            dtypes=ALL,
            differentiable=True,
            variants=({}, {"dtype": torch.int32}),
            cast_safe=True,
        ),
        _reduction("mean.default", dtypes=FLOATING, differentiable=True, variants=upcast),
        _reduction("mean.dim", dtypes=FLOATING, differentiable=True, variants=upcast),
        # No backward for the whole-tensor product: where the input holds two zeros and a nan, eager's
        # gradient is 0 (its shortcut for several zeros) and AOTAutograd's traced formula gives nan, so
        # there is no one right answer (prod.dim_int's backward has no such shortcut: the two agree).
        _reduction("prod.default", dtypes=ALL, differentiable=False),
        _reduction("prod.dim_int", dtypes=ALL, differentiable=True),
        # Extremes and their indices (ties pick the first index).
        _reduction("amax.default", dtypes=ALL, differentiable=True),
        _reduction("amin.default", dtypes=ALL, differentiable=True),
        _reduction("max.dim", dtypes=ALL, differentiable=True),
        _reduction("min.dim", dtypes=ALL, differentiable=True),
        _reduction("max.default", dtypes=ALL, differentiable=True),
        _reduction("min.default", dtypes=ALL, differentiable=True),
        _reduction("argmax.default", dtypes=ALL, differentiable=False),
        _reduction("argmin.default", dtypes=ALL, differentiable=False),
        # Moments: the default correction (1), none, and 2 (more than a one-element row has).
        _reduction("var.correction", dtypes=FLOATING, differentiable=True, variants=corrections),
        _reduction("std.correction", dtypes=FLOATING, differentiable=True, variants=corrections),
        _reduction(
            "var_mean.correction",
            dtypes=FLOATING,
            differentiable=True,
            variants=corrections,
            reference=exact.var_mean,  # eager's running mean is not exact in float64
        ),
        _reduction("var.dim", dtypes=FLOATING, differentiable=True, variants=({}, {"unbiased": False})),
        _reduction("std.dim", dtypes=FLOATING, differentiable=True, variants=({}, {"unbiased": False})),
        _reduction("logsumexp.default", dtypes=PROMOTING, differentiable=True),
        # Boolean reductions.
        _reduction("any.dim", dtypes=ALL, differentiable=False),
        _reduction("any.dims", dtypes=ALL, differentiable=False),
        _reduction("any.default", dtypes=ALL, differentiable=False),
        _reduction("all.dim", dtypes=ALL, differentiable=False),
        _reduction("all.dims", dtypes=ALL, differentiable=False),
        _reduction("all.default", dtypes=ALL, differentiable=False),
        # Norms: 2 (the default), the max norm, the 1-norm, the count of nonzeros; and a general p.
        _reduction(
            "linalg_vector_norm.default",
            dtypes=FLOATING,
            differentiable=True,
            variants=({}, {"ord": inf}, {"ord": 1}, {"ord": 0}),
        ),
        _reduction(
            "norm.ScalarOpt_dim", dtypes=FLOATING, differentiable=True, variants=({"p": None}, {"p": 3})
        ),
        # Softmax and log-softmax: a max, an exp-sum and a pointwise pass over one row.
        _reduction(
            "_softmax.default",
            dtypes=FLOATING,
            differentiable=True,
            variants=softmax_pinned,
            category="normalization",
        ),
        _reduction(
            "_log_softmax.default",
            dtypes=FLOATING,
            differentiable=True,
            variants=softmax_pinned,
            category="normalization",
        ),
        _reduction(
            "softmax.int", dtypes=FLOATING, differentiable=True, variants=upcast, category="normalization"
        ),
        _reduction(
            "log_softmax.int",
            dtypes=FLOATING,
            differentiable=True,
            variants=upcast,
            category="normalization",
        ),
    ]
