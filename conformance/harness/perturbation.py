"""How far rounding in the working dtype alone can move a result: the float64 reference, perturbed.

The oracle holds a compiled result to eager's answer within a tolerance, or to no further from the
float64 reference than eager is. Neither accounts for a program's conditioning: where the program
amplifies a rounding error (cos of a cosh of 100 turns a one-ulp difference in the cosh into 180
ulps), a lowering that is one ulp off where eager happens to be exact is far from eager and from float64,
and is no less right. Nor do they say what a result may be where eager has none (it overflowed).

This module measures that amplification by running the float64 reference again with the result of every
aten op that rounds (forward and backward) multiplied by (1 + s * u), u the unit roundoff of the working
dtype (half its eps: one correct rounding) and s = +1 or -1 per element: once all +1, once all -1, and
twice with signs drawn from a fixed seed. A function no math library rounds correctly (cosh, sin, pow,
...) is moved by its library's documented bound instead (LIBRARY_ULPS, CUDA's for single precision): a
lowering calling libdevice's cosh, 2 ulps at most, is right where it is 1.3 ulps off and eager 0.3
(cos(cosh(x))'s gradient at x = 11.58 turned that into a 16 % difference:
records/fuzz/repro_fuser_cpu_cos_cosh_grad_conditioning_17b7db1f3764.py). In a half working dtype those
functions run in float32 and round once to the half dtype, so u bounds them there. The per-element
spread of those runs around the reference is the error a computation in the working dtype can have with
no error of its own beyond one rounding per op (or its library's bound);
where the runs do not even agree on the result's sign or class, the working dtype has no one answer there.
Ops that only move or select values (views, copies, where, cat, max, neg, ...) round nothing and are
left alone. The runs cost four more references, so `perturbed` is lazy: the oracle calls it only for a
result that its plain rules would fail.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

SEED = 20261127
PATTERNS = ("+", "-", "random", "random")
# Ops whose float64 result is exactly one of their inputs' values (or a constant): no rounding to model.
EXACT_OPS = frozenset(
    {
        "_to_copy",
        "abs",
        "alias",
        "cat",
        "ceil",
        "clamp",
        "clamp_max",
        "clamp_min",
        "clone",
        "constant_pad_nd",
        "copy",
        "copy_",
        "detach",
        "empty",
        "empty_like",
        "empty_strided",
        "fill",
        "fill_",
        "floor",
        "full",
        "full_like",
        "gather",
        "index",
        "index_select",
        "lift_fresh",
        "masked_fill",
        "max",
        "maximum",
        "min",
        "minimum",
        "neg",
        "new_empty",
        "new_empty_strided",
        "new_full",
        "new_ones",
        "new_zeros",
        "ones",
        "ones_like",
        "relu",
        "round",
        "scalar_tensor",
        "select_scatter",
        "sign",
        "slice_scatter",
        "stack",
        "threshold_backward",
        "trunc",
        "where",
        "zero_",
        "zeros",
        "zeros_like",
    }
)


# The maximum error, in ulps, CUDA documents for each single-precision math function a lowering may call
# (CUDA C++ Programming Guide, "Mathematical Functions"; libdevice implements them); for an op built on one
# of them (sigmoid on exp, logit and xlogy on log, digamma as lgamma) that function's. Ops not here round
# correctly or are exact.
LIBRARY_ULPS = {
    "sin": 2, "cos": 2, "tan": 4, "asin": 2, "acos": 2, "atan": 2, "atan2": 3,
    "sinh": 3, "cosh": 2, "tanh": 2, "asinh": 3, "acosh": 4, "atanh": 3,
    "exp": 2, "exp2": 2, "expm1": 1, "log": 1, "log2": 1, "log10": 2, "log1p": 1,
    "pow": 4, "rsqrt": 2, "erf": 2, "erfc": 4, "erfinv": 2, "lgamma": 6, "digamma": 6,
    "hypot": 3, "logit": 1, "sigmoid": 2, "xlogy": 1,
}  # fmt: skip


class RoundingPerturbation(TorchDispatchMode):
    """Multiplies each float64 result of a rounding aten op by (1 + s * u), in place (through `.data`, so
    autograd's version counters do not see it), s per `pattern`: '+' or '-' everywhere, or 'random' signs."""

    def __init__(self, dtype: torch.dtype, pattern: str, generator: torch.Generator):
        super().__init__()
        self.unit_roundoff, self.pattern, self.generator = unit_roundoff(dtype), pattern, generator
        self.library_bounds = dtype not in (torch.float16, torch.bfloat16)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func.is_view or func.overloadpacket.__name__ in EXACT_OPS:
            return result
        mutable = func._schema.is_mutable
        given = {
            t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
        }
        for leaf in tree_leaves(result):
            if not isinstance(leaf, torch.Tensor) or leaf.dtype != torch.float64 or leaf.numel() == 0:
                continue
            if not mutable and leaf.untyped_storage().data_ptr() in given:
                continue  # an alias of an argument (detach, a view not flagged as one): nothing rounded
            self._perturb(leaf.data, self._relative_error(func.overloadpacket.__name__))
        return result

    def _relative_error(self, name: str) -> float:
        """One correct rounding, or the library's bound: an ulp is at most 2 u."""
        ulps = LIBRARY_ULPS.get(name) if self.library_bounds else None
        return self.unit_roundoff * (2 * ulps if ulps else 1)

    def _perturb(self, values: torch.Tensor, error: float) -> None:
        if self.pattern == "random":
            signs = torch.randint(0, 2, values.shape, generator=self.generator, dtype=torch.int8)
            factor = 1 + (signs.to(torch.float64) * 2 - 1).to(values.device) * error
        else:
            factor = 1 + error if self.pattern == "+" else 1 - error
        values.mul_(factor)


def unit_roundoff(dtype: torch.dtype) -> float:
    """One correct rounding's relative error in `dtype`: half its eps."""
    return torch.finfo(dtype).eps / 2


def working_dtype(values) -> torch.dtype | None:
    """The floating dtype of `values` (tensors, nested in lists and tuples) with the coarsest rounding."""
    found = {
        t.dtype for t in tree_leaves(values) if isinstance(t, torch.Tensor) and t.dtype.is_floating_point
    }
    return max(found, key=lambda dtype: torch.finfo(dtype).eps, default=None)


def perturbed(run: Callable[[], object], dtype: torch.dtype | None) -> Callable[[], list]:
    """A lazy, cached list of `run()`'s results, one per pattern, each run under a perturbation by the
    rounding of `dtype`. `run` computes the float64 reference afresh (fresh inputs each call). An empty
    list where `dtype` is None or a run raises: no estimate, the oracle's plain rules alone."""
    cache: list[list] = []

    def runs() -> list:
        if not cache:
            cache.append(_runs(run, dtype))
        return cache[0]

    return runs


def _runs(run: Callable[[], object], dtype: torch.dtype | None) -> list:
    if dtype is None:
        return []
    generator = torch.Generator().manual_seed(SEED)
    results = []
    try:
        for pattern in PATTERNS:
            with RoundingPerturbation(dtype, pattern, generator):
                results.append(run())
    except Exception:
        return []
    return results
