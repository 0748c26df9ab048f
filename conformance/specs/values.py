"""Sample tensors: awkward values, seeded random values, and the memory layouts they are laid out in.

Every tensor the suite feeds a backend comes from `make`: its first elements walk the dtype's awkward
values (±0, ±inf, nan, subnormals, the largest and smallest magnitudes, integer limits, the op's domain
edges) so that operand 0 and operand 1 together meet every pair of them; the rest are random values
from the op's domain, drawn from a generator seeded by the sample, so every run draws the same values.

Layouts: `contiguous`, `noncontiguous` (every other column of a wider buffer whose gaps hold nan, or
an integer dtype's largest value, so a read out of bounds shows), `transposed` (strides reversed),
`expanded` (stride 0 in the first dim of size > 1), `channels_last` (4-d only) and `offset` (a storage
offset into a buffer whose head holds nan).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
LAYOUTS = ("contiguous", "noncontiguous", "transposed", "expanded", "channels_last", "offset")
FLOATING = ("float16", "bfloat16", "float32", "float64")

inf, nan = math.inf, math.nan


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def awkward_values(dtype: torch.dtype, edges: Sequence[float] = (), huge: bool = True) -> list:
    """The values every op must get right for `dtype`, plus the op's own domain edges. Without `huge`,
    no finite magnitudes far apart (a sum of 1e30 and -1e30 among small values depends on the order of
    summation: there is no one right answer to compare with)."""
    if dtype == torch.bool:
        return [False, True]
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        specials = [0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 0.5, -2.5, 3.0, 0.1]
        specials += [info.tiny, info.smallest_normal / 4, -1e-30]
        if huge:
            specials += [info.max, -info.max, 1e30]
        return specials + [float(e) for e in edges if float(e) not in specials]
    info = torch.iinfo(dtype)
    if dtype == torch.uint8:
        return [0, 1, 2, 3, 7, 100, 127, 128, 200, 254, 255]
    return [0, 1, -1, 2, -2, 3, -3, 7, -8, 100, -100, info.max, info.min]


def fill_value(dtype: torch.dtype):
    """What the gaps of a non-contiguous buffer hold: nan where it exists, else a loud integer."""
    if dtype.is_floating_point:
        return nan
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max


def random_values(
    dtype: torch.dtype, count: int, generator: torch.Generator, domain: tuple[float, float] | None
) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(count, generator=generator) < 0.5
    if dtype.is_floating_point:
        if domain is None:
            values = torch.randn(count, generator=generator, dtype=torch.float64) * 3
        else:
            low, high = domain
            values = low + (high - low) * torch.rand(count, generator=generator, dtype=torch.float64)
        return values.to(dtype)
    info = torch.iinfo(dtype)
    low, high = (-50, 50) if domain is None else (math.ceil(domain[0]), math.floor(domain[1]) + 1)
    low, high = max(low, info.min), min(high, info.max)
    return torch.randint(low, max(high, low + 1), (count,), generator=generator).to(dtype)


def values_for(
    shape: Sequence[int],
    dtype: torch.dtype,
    *,
    position: int,
    seed: int,
    domain: tuple[float, float] | None = None,
    edges: Sequence[float] = (),
    specials: bool = True,
    huge: bool = True,
) -> torch.Tensor:
    """A contiguous tensor: the awkward-value walk for operand `position`, then seeded random values."""
    numel = math.prod(shape)
    generator = torch.Generator().manual_seed(seed * 7919 + position)
    values = random_values(dtype, numel, generator, domain)
    if specials and numel:
        awkward = awkward_values(dtype, edges, huge)
        n = len(awkward)
        walked = min(numel, n * n)
        walk = [awkward[(i // n**position) % n] for i in range(walked)] if position < 3 else awkward[:walked]
        values[: len(walk)] = torch.tensor(walk, dtype=dtype)
    return values.reshape(tuple(shape))


def lay_out(values: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values in `layout` (a layout that does not apply to the shape gives it contiguous)."""
    shape = tuple(values.shape)
    if layout == "contiguous" or values.dim() == 0 or values.numel() == 0:
        return values.clone()
    if layout == "noncontiguous":
        wide = torch.full((*shape[:-1], shape[-1] * 2), fill_value(values.dtype), dtype=values.dtype)
        view = wide[..., ::2]
        view.copy_(values)
        return view
    if layout == "transposed":
        dims = tuple(reversed(range(values.dim())))
        return values.permute(dims).contiguous().permute(dims)
    if layout == "expanded":
        dim = next((d for d, size in enumerate(shape) if size > 1), None)
        if dim is None:
            return values.clone()
        row = values.narrow(dim, 0, 1).clone()  # stride 0: every index of `dim` reads the first row
        return row.expand(shape)
    if layout == "channels_last":
        if values.dim() != 4:
            return values.clone()
        return values.contiguous(memory_format=torch.channels_last)
    if layout == "offset":
        head = 5
        buffer = torch.full((head + values.numel(),), fill_value(values.dtype), dtype=values.dtype)
        view = buffer[head:].view(shape)
        view.copy_(values)
        return view
    raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")


def describe(tensor: torch.Tensor) -> str:
    """'float16[37, 7] strides (14, 2) offset 5' — enough to rebuild the layout by hand."""
    text = f"{dtype_name(tensor.dtype)}{list(tensor.shape)}"
    if tensor.dim() and not tensor.is_contiguous():
        text += f" strides {tuple(tensor.stride())}"
    if tensor.storage_offset():
        text += f" offset {tensor.storage_offset()}"
    return text


def replicate(tensor: torch.Tensor, device: str | torch.device | None = None) -> torch.Tensor:
    """An independent copy with the same storage contents, strides and offset (gaps included), on
    `device`, so that in-place ops and layout-sensitive kernels see exactly what the original would."""
    whole = torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(tensor.untyped_storage())
    copy = whole.clone().to(device or tensor.device)
    return copy.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())
