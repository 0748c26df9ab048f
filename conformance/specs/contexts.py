"""Fusion contexts: where in a program the op under test sits.

A lowering that is right alone can be wrong when its inputs arrive in registers from a producer, when
its output feeds a consumer in the same kernel, or when it sits before or after a reduction. Each
context wraps the op's tensor inputs, its tensor outputs, or neither, with functions that keep every
value exactly (so the op still sees the awkward values) but give a fusing backend something to fuse:

- `producer`: every tensor input is computed by a pointwise op first (`-(-x)`, or `not not x`);
- `consumer`: every tensor output feeds a pointwise op (the same identity);
- `into_reduction`: every tensor output is reduced by max over its last dim (max is exact and does
  not depend on the order of the reduction, so there is one right answer — but for the sign of a tie
  between +0.0 and -0.0, which the oracle leaves unchecked here; a zero-size last dim is summed
  instead, as max has no identity);
- `from_reduction`: every tensor input is the max over a broadcast dim of 3 copies of itself.

Eager runs the same wrapped program, so the comparison stays one program against one program.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

CONTEXTS = ("alone", "producer", "consumer", "into_reduction", "from_reduction")


def same(x: torch.Tensor) -> torch.Tensor:
    """x, recomputed by two pointwise ops (exact for every dtype, nan and -0.0 included)."""
    if x.dtype == torch.bool:
        return torch.logical_not(torch.logical_not(x))
    return torch.neg(torch.neg(x))


def reduced(y: torch.Tensor) -> torch.Tensor:
    if y.dim() and y.shape[-1] == 0:
        return torch.sum(y, -1)
    return torch.amax(y, -1)


def max_of_copies(x: torch.Tensor) -> torch.Tensor:
    """x, as a real reduction: the max over a new dim holding 3 copies (stride 0) of every element."""
    return torch.amax(x.unsqueeze(-1).expand(*x.shape, 3), -1)


# name -> (input wrapper, output wrapper); None leaves that side alone.
WRAPPERS: dict[str, tuple[Callable | None, Callable | None]] = {
    "alone": (None, None),
    "producer": (same, None),
    "consumer": (None, same),
    "into_reduction": (None, reduced),
    "from_reduction": (max_of_copies, None),
}
