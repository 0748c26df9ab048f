"""An aten call the graph makes eagerly: an op the fuser does not lower, a view, a getitem."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from fuser import metrics

log = logging.getLogger("fuser")


def materialize(arg: Any, env: list, slots: dict[fx.Node, int]) -> Any:
    """`arg` (a node's args, kwargs or a graph's outputs) with each node replaced by its value in env."""
    return fx.node.map_arg(arg, lambda n: env[slots[n]])


@dataclass
class EagerStep:
    """An aten call made eagerly (an op the fuser does not lower, a view, a getitem)."""

    node: fx.Node
    slots: dict[fx.Node, int]
    counted: bool  # views and getitems are bookkeeping, not extern calls
    traced_dtypes: tuple = field(init=False)

    def __post_init__(self) -> None:
        value = self.node.meta.get("val")
        values = value if isinstance(value, (tuple, list)) else (value,)
        self.traced_dtypes = tuple(v.dtype if isinstance(v, torch.Tensor) else None for v in values)

    def __call__(self, env: list, key: tuple[int, ...] = ()) -> None:
        args = materialize(self.node.args, env, self.slots)
        kwargs = materialize(self.node.kwargs, env, self.slots)
        result = self.node.target(*args, **kwargs)
        if self.counted:
            # One attribute read for a single tensor; tuples are checked element by element.
            if (
                isinstance(result, (tuple, list))
                or getattr(result, "dtype", None) is not self.traced_dtypes[0]
            ):
                result = self._as_traced(result)
            metrics.bump("extern_calls")
        env[self.slots[self.node]] = result

    def _as_traced(self, result: Any) -> Any:
        # Kernels downstream were generated for the dtypes the graph was traced with. Where an op's eager
        # kernel disagrees with its meta kernel (CPU batch norm on bfloat16 saves float32 statistics; its
        # meta says bfloat16), a kernel would read the bytes as the wrong type: convert to the traced dtype.
        results = result if isinstance(result, (tuple, list)) else (result,)
        pairs = list(zip(results, self.traced_dtypes, strict=False))  # a tuple may carry non-tensors too
        if all(traced is None or not isinstance(r, torch.Tensor) or r.dtype is traced for r, traced in pairs):
            return result
        log.info("%s returned %s where it was traced as %s; converted", self.node.target,
                 [getattr(r, "dtype", None) for r in results], list(self.traced_dtypes))  # fmt: skip
        converted = [r.to(t) if isinstance(r, torch.Tensor) and t is not None else r for r, t in pairs]
        return type(result)(converted) if isinstance(result, (tuple, list)) else converted[0]
