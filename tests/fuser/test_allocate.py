"""Output allocation (`fuser.runtime.allocate`): torch's argument-parsing-free allocators where they
serve the kernel's device, `torch.empty_strided` elsewhere, the same tensor either way."""

from __future__ import annotations

import pytest
import torch

from fuser.runtime.allocate import allocator


@pytest.mark.parametrize(
    "shape, strides, dtype",
    [
        ((3, 5), (5, 1), torch.float32),
        ((4, 3), (1, 4), torch.bfloat16),
        ((), (), torch.int64),
        ((0, 7), (7, 1), torch.bool),
    ],
)
def test_an_output_has_the_planned_shape_strides_dtype_and_device(shape, strides, dtype, device):
    made = allocator(torch.empty(0, device=device).device)(shape, strides, dtype)
    assert (made.shape, made.stride(), made.dtype, made.device.type) == (shape, strides, dtype, device)


def test_the_cpu_takes_torchs_fast_allocator_and_a_device_without_one_the_general():
    assert allocator(torch.device("cpu")) is torch._C._dynamo.guards._empty_strided_cpu
    made = allocator(torch.device("meta"))((2, 3), (3, 1), torch.float16)  # no _empty_strided_meta
    assert (made.shape, made.stride(), made.dtype, made.device.type) == (
        (2, 3),
        (3, 1),
        torch.float16,
        "meta",
    )
