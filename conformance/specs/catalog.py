"""Every op spec the suite knows, by op name (checked once, at import)."""

from __future__ import annotations

from conformance.specs import OpSpec, registry
from conformance.specs.created import created_specs
from conformance.specs.fallbacks import fallback_specs
from conformance.specs.indexing import indexing_specs
from conformance.specs.losses import loss_specs
from conformance.specs.pointwise import pointwise_specs
from conformance.specs.random import random_specs
from conformance.specs.reductions import reduction_specs
from conformance.specs.shaped import shaped_specs

SPECS: dict[str, OpSpec] = registry(
    pointwise_specs()
    + reduction_specs()
    + shaped_specs()
    + created_specs()
    + loss_specs()
    + indexing_specs()
    + fallback_specs()
    + random_specs()
)


def overload_counts(specs: dict[str, OpSpec] = SPECS) -> dict[str, int]:
    """How many aten overloads the suite knows, and how many of them are in-place twins of others."""
    twins = sum(1 for s in specs.values() if s.category == "inplace")
    return {"overloads": len(specs), "not_inplace": len(specs) - twins, "inplace_twins": twins}
