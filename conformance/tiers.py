"""Tiers: which op x dtype x context x direction cases a run makes.

- `quick` (every pull request, CPU in CI): every op alone, forward, in every dtype eager supports;
  one fused context per op (the four rotate over the ops, so each context covers a quarter of them)
  in the op's primary dtype; backward alone in the primary dtype. Samples are the quick tier's.
- `full`: every dtype in every context, forward, and backward for every floating dtype; samples add
  large odd shapes (1823x781) and longer rows.

The primary dtype is float32 where the op supports it, else its first supported dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.caseid import CaseKey
from conformance.contexts import CONTEXTS
from conformance.specs import OpSpec
from conformance.values import FLOATING

TIER_NAMES = ("quick", "full")
FUSED = CONTEXTS[1:]


def primary(dtypes: Sequence[str]) -> str | None:
    if not dtypes:
        return None
    return "float32" if "float32" in dtypes else dtypes[0]


def cases_for(spec: OpSpec, dtypes: Sequence[str], tier: str, backend: str, device: str) -> list[CaseKey]:
    def key(dtype: str, context: str, direction: str) -> CaseKey:
        return CaseKey(spec.op, dtype, context, direction, backend, device)

    main = primary(dtypes)
    if main is None:
        return []
    differentiable = [d for d in dtypes if spec.differentiable and d in FLOATING]
    if tier == "full":
        keys = [key(d, c, "fwd") for d in dtypes for c in CONTEXTS]
        return keys + [key(d, c, "bwd") for d in differentiable for c in CONTEXTS]
    if tier != "quick":
        raise ValueError(f"unknown tier {tier!r}; known: {', '.join(TIER_NAMES)}")
    rotation = FUSED[sum(map(ord, spec.op)) % len(FUSED)]
    keys = [key(d, "alone", "fwd") for d in dtypes] + [key(main, rotation, "fwd")]
    if main in differentiable:
        keys.append(key(main, "alone", "bwd"))
    return keys
