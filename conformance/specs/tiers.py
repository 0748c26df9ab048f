"""Tiers: which op x dtype x context x direction cases a run makes.

- `quick` (every pull request, CPU in CI, under 15 minutes on two cores): every op alone, forward, in
  each of QUICK_DTYPES it supports (bfloat16, float32, a wide and a narrow integer, bool) — views,
  normalizations and fallbacks in their primary dtype and bfloat16, in-place twins in the primary; one fused context per op (the four rotate over
  the ops, so each context covers a quarter of them) and backward alone, both in the primary dtype.
  Samples are the quick tier's (attribute variants and scalar sweeps on the awkward-value walk only).
- `full`: every dtype in every context, forward, and backward for every floating dtype; samples add
  large odd shapes (1823x781) and longer rows.
- `models`: no op cases; the suite's model blocks (`conformance/harness/blocks.py`, run by
  `conformance/test_blocks.py`) in fp32, bf16 parameters and bf16 autocast, and the optimizer-step
  programs (`conformance/harness/optimizers.py`, run by `conformance/test_optimizers.py`).

The primary dtype is float32 where the op supports it, else its first supported dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from conformance.specs import OpSpec
from conformance.specs.caseid import CaseKey
from conformance.specs.contexts import CONTEXTS
from conformance.specs.values import FLOATING

TIER_NAMES = ("quick", "full", "models")
OP_TIERS = ("quick", "full")
QUICK_DTYPES = ("bfloat16", "float32", "int64", "uint8", "bool")
# Categories whose dtype handling is per-op code in a fusing backend; views, normalizations and eager
# fallbacks run their primary dtype and bfloat16 in the quick tier, in-place twins their primary one.
PER_DTYPE_IN_QUICK = ("pointwise", "cast", "reduction", "backward", "created")
FUSED = CONTEXTS[1:]


def primary(dtypes: Sequence[str]) -> str | None:
    if not dtypes:
        return None
    return "float32" if "float32" in dtypes else dtypes[0]


def cases_for(
    spec: OpSpec,
    dtypes: Sequence[str],
    tier: str,
    backend: str,
    device: str,
    backward_ok: Callable[[str], bool] = lambda dtype: True,
) -> list[CaseKey]:
    """`backward_ok(dtype)`: whether eager has a backward in that dtype (asked only of the dtypes the tier
    would run backward in): eager's CPU i1 has no Half backward, so such a case could only fail."""

    def key(dtype: str, context: str, direction: str) -> CaseKey:
        return CaseKey(spec.op, dtype, context, direction, backend, device)

    main = primary(dtypes)
    if main is None:
        return []
    floating = [d for d in dtypes if spec.differentiable and d in FLOATING]
    wanted = floating if tier == "full" else [main] if main in floating else []
    differentiable = [d for d in floating if d in wanted and backward_ok(d)]
    if tier == "full":
        keys = [key(d, c, "fwd") for d in dtypes for c in CONTEXTS]
        return keys + [key(d, c, "bwd") for d in differentiable for c in CONTEXTS]
    if tier != "quick":
        raise ValueError(f"the {tier!r} tier has no op cases; op tiers: {', '.join(OP_TIERS)}")
    rotation = FUSED[sum(map(ord, spec.op)) % len(FUSED)]
    wanted = (
        QUICK_DTYPES
        if spec.category in PER_DTYPE_IN_QUICK
        else ()
        if spec.category == "inplace"
        else ("bfloat16",)
    )
    quick = [d for d in dtypes if d in wanted] or [main]
    keys = [key(d, "alone", "fwd") for d in dict.fromkeys([main, *quick])] + [key(main, rotation, "fwd")]
    if main in differentiable:
        keys.append(key(main, "alone", "bwd"))
    return keys
