"""Testing-only slowdowns, so that the gate's catching power can be measured. Never on unless asked:

    PERFGATE_TESTING_SLOWDOWN=kernel:pointwise_chain,host:softmax python -m perfgate gate --against HEAD

- `kernel:W` follows each call of workload W at its timed size with a device-to-device copy sized so
  that the call's device time grows by about 10%: calibrated against W's kernel time in this process,
  the slowdown achieved is measured and recorded.
- `host:W` spends about 15 µs of busy host time before each call of W at its tiny size (host time per
  call, the launch overhead).

W may be `*`, every workload. GPU tier only. The gate passes the variable to head's measuring
processes and never to base's, so an A/B run sees head slowed and base as it is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch

ENV = "PERFGATE_TESTING_SLOWDOWN"
KINDS = ("kernel", "host")
KERNEL_SLOWDOWN = 0.10
HOST_DELAY_S = 15e-6


def requested(workload: str) -> set[str]:
    """The kinds of slowdown the environment asks for on `workload`."""
    kinds = set()
    for item in filter(None, os.environ.get(ENV, "").split(",")):
        kind, _, name = item.partition(":")
        if kind not in KINDS or not name:
            raise ValueError(f"{ENV}: {item!r} is not KIND:WORKLOAD with KIND one of {', '.join(KINDS)}")
        if name in (workload, "*"):
            kinds.add(kind)
    return kinds


class WithHostDelay:
    """A compiled program that first spins HOST_DELAY_S on the host (sleep is far coarser than 15 µs)."""

    def __init__(self, compiled: Callable):
        self.compiled = compiled

    def __call__(self, *args: Any) -> Any:
        until = time.perf_counter() + HOST_DELAY_S
        while time.perf_counter() < until:
            pass
        return self.compiled(*args)


class WithExtraCopy:
    """A compiled program followed by a copy of `moved` bytes (half read, half written) on the device."""

    def __init__(self, compiled: Callable, moved: int, device: str):
        self.compiled = compiled
        self.device = device
        self.resize(moved)

    def resize(self, moved: int) -> None:
        self.moved = max(2, moved // 2 * 2)
        self.source = torch.empty(self.moved // 2, dtype=torch.uint8, device=self.device)
        self.target = torch.empty_like(self.source)

    def __call__(self, *args: Any) -> Any:
        result = self.compiled(*args)
        self.target.copy_(self.source)
        return result


def slow_kernel(step: Any, time_ms: Callable[[Any], float], copy_peak: float, device: str) -> float:
    """Make `step` about KERNEL_SLOWDOWN slower on the device; the slowdown achieved (0.1 is 10%).

    Small copies run below the copy peak, so the copy is rescaled once by what its first size achieved."""
    before = time_ms(step)
    copy = WithExtraCopy(step.compiled, int(KERNEL_SLOWDOWN * before * 1e-3 * copy_peak), device)
    step.compiled = copy
    achieved = time_ms(step) / before - 1
    copy.resize(int(copy.moved * KERNEL_SLOWDOWN / max(achieved, 0.01)))
    return time_ms(step) / before - 1
