"""The launch settings a GPU would get (`fuser.runtime.launch_config.choose_config`), read from kernels the
fuser makes here: decided from the kernel's IR, so checked without a GPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fuser
from fuser.runtime import launch_config


def _pointwise_kernel(fn, *args):
    (kernel,) = fuser.explain(fn, *args, fuser_options={"unvalidated": "fuse"}).kernels
    assert kernel.kind == "pointwise"
    return kernel


def _gpu_config(kernel, numel: int) -> launch_config.Config:
    return launch_config.choose_config([kernel], {"numel": numel}, interpreted=False)


def test_a_pointwise_kernel_reading_a_broadcast_operand_gets_more_elements_a_thread():
    # bias + gelu reads the bias at `offset % size1`: an integer division a thread, which its loads wait
    # for; twice the elements a thread halve that wait (measured on the H200, records/gpu-h200-2026-12-03-s28.md).
    numel = 16384 * 4096
    bias_gelu = _pointwise_kernel(lambda x, b: F.gelu(x + b), torch.randn(8, 16), torch.randn(16))
    config = _gpu_config(bias_gelu, numel)
    assert config.blocks == {"BLOCK": launch_config.GPU_INDEXED_BLOCK}
    assert config.warps == launch_config.GPU_INDEXED_WARPS
    assert config.grid == (numel // launch_config.GPU_INDEXED_BLOCK,)
    transposed = _pointwise_kernel(lambda x, y: x * y, torch.randn(8, 16), torch.randn(16, 8).t())
    assert _gpu_config(transposed, numel).blocks == {"BLOCK": launch_config.GPU_INDEXED_BLOCK}


def test_a_small_pointwise_kernel_reading_a_broadcast_operand_keeps_the_plain_block():
    # Under GPU_INDEXED_MIN_NUMEL the launch bounds the kernel, and the larger block only doubles its
    # compile (llama's first call, tools/probes/kernel_compiles_for_gpu.py).
    bias_gelu = _pointwise_kernel(lambda x, b: F.gelu(x + b), torch.randn(8, 16), torch.randn(16))
    small = launch_config.GPU_INDEXED_MIN_NUMEL - 1
    config = _gpu_config(bias_gelu, small)
    assert (config.blocks, config.warps) == ({"BLOCK": launch_config.GPU_BLOCK}, launch_config.GPU_WARPS)
    large = _gpu_config(bias_gelu, launch_config.GPU_INDEXED_MIN_NUMEL)
    assert large.blocks == {"BLOCK": launch_config.GPU_INDEXED_BLOCK}


def test_a_pointwise_kernel_of_flat_and_scalar_loads_keeps_the_plain_block():
    # swiglu's loads are all at the flat offset, and a 0-d operand is one scalar load: no division, and
    # the larger block was slower on the H200 (0.0933 against 0.0927 ms).
    swiglu = _pointwise_kernel(
        lambda a, b, s: F.silu(a) * b * s, torch.randn(8, 16), torch.randn(8, 16), torch.tensor(2.0)
    )
    config = _gpu_config(swiglu, 1 << 20)
    assert (config.blocks, config.warps) == ({"BLOCK": launch_config.GPU_BLOCK}, launch_config.GPU_WARPS)
    assert config.grid == ((1 << 20) // launch_config.GPU_BLOCK,)
    interpreted = launch_config.choose_config([swiglu], {"numel": 100}, interpreted=True)
    assert interpreted.blocks == {"BLOCK": 128}  # the interpreter's block: the whole tensor, a power of two
