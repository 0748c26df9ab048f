"""The oracle's policy, in one place: how far a backend may be from eager and from float64, for every
check the suite makes. `conformance.harness.oracle` applies it to one result (its rules 1–7 are described
there); the runner (op cases), the fuzzer (whole programs), the optimizer steps, the model blocks and the
zoo all choose their tolerances and budgets here, so a rule is changed once and read once.

One yardstick throughout: **eager's own distance from float64, times K = 2**. An op case's result past
the dtype's tolerance (rule 7), its ulps (rule 6), a model's gradients and a model block's are each
allowed twice eager's error (plus a floor where values are summed over a whole model). The zoo's fp32
factor was 4 until 2026-11-27 ("reordered float32 sums"), with no measurement behind it: on the lent
H100 and on the CPU every zoo model's worst fp32 gradient is within eager's error plus the floor (at
most 0.50 of the budget at factor 2, `records/default-config-h100-2026-11-27b.md`'s runs), so it is 2,
like everything else. Only a training curve keeps 4: it measures the drift of a chaotic process, where
eager's drift is one sample of how any rounding difference grows, not an error of one computation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

# Rule 7 (and rule 3's allowed error): a result past the tolerance may be no further from float64 than
# K times eager is.
K = 2.0
# Rule 6: a backend may be ULP_K times as many ulps (of the result's scale) off float64 as eager, or the
# op's budget. The default budget: a fused kernel evaluates the same formula in the same precision with
# its own rounding order and its own libdevice; a spec may raise it, with a reason.
ULP_K = 2.0
ULP_BUDGET = 8.0
ULP_DTYPES = (torch.float32, torch.float64)
# Rule 4: torch.testing.assert_close's defaults, (rtol, atol); a spec may override them with a reason.
TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
# Contexts whose max over the op's results (or inputs) may return +0.0 or -0.0 for a tie of zeros:
# eager's sign there is the order its loop ran in, not an answer (rule 5 is off).
SIGNLESS_CONTEXTS = ("into_reduction", "from_reduction")


def loosest_tolerance(dtypes: Iterable[torch.dtype]) -> tuple[float, float] | None:
    """The loosest rule-4 tolerance among the floating dtypes a computation involves (a float64 result
    computed from float32 inputs is only as exact as float32 arithmetic); None where none is floating."""
    found = [TOLERANCES[d] for d in dtypes if d in TOLERANCES]
    return max(found, key=lambda rtol_atol: rtol_atol[0]) if found else None


@dataclass(frozen=True)
class Budget:
    """A whole program's budget (model blocks, the zoo): the backend's error, relative to the gradient's
    largest float64 value, may be `factor` times eager's plus `floor`."""

    factor: float
    floor: float
    why: str


BUDGETS = {
    # Reordered float32 sums (a fused reduction, a split one) move a gradient by a few ulps of its largest
    # terms: within twice eager's error plus the floor on every zoo model measured (see above).
    "fp32": Budget(K, 1e-5, "reordered float32 sums; eager's own error times 2"),
    # Under autocast the matmuls run in bfloat16 in both; a backend that keeps fused intermediates in
    # float32 is closer than eager, one that rounds twice is further: twice eager's error.
    "bf16": Budget(K, 1e-2, "bfloat16 matmuls in both; one extra rounding per fused group allowed"),
    # Parameters and inputs in bfloat16 (no autocast): every op rounds to bfloat16 in eager, while a fused
    # group keeps its intermediates in float32 and rounds once, so a backend is usually closer; twice.
    "bf16-params": Budget(K, 1e-2, "bfloat16 everywhere in both; fused groups round once"),
}
# A parameter's gradient is judged relative to its own scale, or to this fraction of the model's largest
# gradient where its own is smaller (zero in exact arithmetic, it would make any rounding look infinite).
SMALL_GRADIENT = 1e-3
# A training curve may leave float64's curve by four times as much as eager's does, plus 1e-3 of the loss.
# Runs are chaotic (batch norm over a batch of two): any rounding difference grows step by step, so
# eager's drift is one sample of that growth, not the error of one computation.
TRAINING = Budget(4.0, 1e-3, "eager's own drift from a float64 run, times 4")
