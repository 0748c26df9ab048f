"""Testing-only slowdowns, so that the gate's catching power can be measured. Never on unless asked:

    PERFGATE_TESTING_SLOWDOWN=kernel:pointwise_chain,host:softmax python -m perfgate gate --against HEAD

- `kernel:W` follows each call of workload W at its timed size with a device-to-device copy sized so
  that the call's device time grows by about 10%: calibrated against W's kernel time in this process,
  the slowdown achieved is measured and recorded.
- `host:W` spends about 15 µs of busy host time before each call of W at its tiny size (host time per
  call, the launch overhead).

A size other than those the thresholds were set from: `kernel=0.07:W` (a fraction of the device
time), `host=8:W` (µs). W may be `*`, every workload. GPU tier only. The gate passes the variable to head's measuring
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


DEFAULT_SIZES = {"kernel": KERNEL_SLOWDOWN, "host": HOST_DELAY_S * 1e6}  # a fraction; µs


def requested(workload: str) -> dict[str, float]:
    """The kinds of slowdown the environment asks for on `workload`, each with its size (the kernel
    slowdown as a fraction of device time, the host delay in µs)."""
    kinds = {}
    for item in filter(None, os.environ.get(ENV, "").split(",")):
        kind_size, _, name = item.partition(":")
        kind, _, size = kind_size.partition("=")
        if kind not in KINDS or not name:
            raise ValueError(
                f"{ENV}: {item!r} is not KIND[=SIZE]:WORKLOAD with KIND one of {', '.join(KINDS)}"
            )
        try:
            value = float(size) if size else DEFAULT_SIZES[kind]
        except ValueError:
            raise ValueError(f"{ENV}: {item!r}: the size {size!r} is not a number") from None
        if not value > 0:
            raise ValueError(f"{ENV}: {item!r}: the size must be positive")
        if name in (workload, "*"):
            kinds[kind] = value
    return kinds


class WithHostDelay:
    """A compiled program that first spins `delay_s` on the host (sleep is far coarser than 15 µs)."""

    def __init__(self, compiled: Callable, delay_s: float = HOST_DELAY_S):
        self.compiled = compiled
        self.delay_s = delay_s

    def __call__(self, *args: Any) -> Any:
        until = time.perf_counter() + self.delay_s
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


def slow_kernel(
    step: Any,
    time_ms: Callable[[Any], float],
    copy_peak: float,
    device: str,
    slowdown: float = KERNEL_SLOWDOWN,
) -> float:
    """Make `step` about `slowdown` slower on the device; the slowdown achieved (0.1 is 10%).

    Small copies run below the copy peak, so the copy is rescaled once by what its first size achieved."""
    before = time_ms(step)
    copy = WithExtraCopy(step.compiled, int(slowdown * before * 1e-3 * copy_peak), device)
    step.compiled = copy
    achieved = time_ms(step) / before - 1
    copy.resize(int(copy.moved * slowdown / max(achieved, 0.01)))
    return time_ms(step) / before - 1
