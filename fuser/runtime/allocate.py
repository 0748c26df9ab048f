"""Allocating a kernel's outputs: what every launch pays before the kernel runs.

`torch.empty_strided` parses its arguments and dispatches: 2.0 µs a call on the H200 box, a third of the
fuser's runtime share of a small call (records/call-path-parts-h200-2026-11-28-s19.md). torch's own
`_empty_strided_cpu` and `_empty_strided_cuda` (what Inductor's generated code allocates with) skip both:
0.39 µs against 1.02 on this CPU. The CUDA one allocates on the current device, so it serves a kernel
whose device is the current one; any other gets `torch.empty_strided` on its own device.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Allocate = Callable[[tuple[int, ...], tuple[int, ...], torch.dtype], torch.Tensor]


def allocator(device: torch.device) -> Allocate:
    """A function making an uninitialized tensor of a shape, strides and dtype on `device`."""

    def general(shape: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty_strided(shape, strides, dtype=dtype, device=device)

    fast = bare_allocator(device)
    if fast is None:
        return general
    if device.type == "cpu" or device.index is None:
        return fast
    index = device.index

    def on_cuda(shape: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return (
            fast(shape, strides, dtype)
            if torch._C._cuda_getDevice() == index
            else general(shape, strides, dtype)
        )

    return on_cuda


def bare_allocator(device: torch.device) -> Allocate | None:
    """torch's own allocator for `device`'s type (a CUDA one allocates on the current device), or None."""
    if device.type not in ("cpu", "cuda"):
        return None
    return getattr(getattr(torch._C._dynamo, "guards", None), f"_empty_strided_{device.type}", None)
