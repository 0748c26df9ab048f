"""Fuser bugs the zoo tier found in real model code, each reduced to the program that shows it."""

from __future__ import annotations

import copy

import torch

import fuser


def _max_error(expected, actual) -> float:
    # A nan counts as an infinite error (Python's max would skip past it).
    errors = [
        torch.nan_to_num((e.float() - a.float()).abs(), nan=torch.inf).max().item()
        for e, a in zip(expected, actual, strict=True)
    ]
    return max(errors)


def _sums_beside_a_transposed_slice(t4, g12, m5, x):
    y = (t4 + g12)[:, :, 0:8].transpose(1, 2).clone(memory_format=torch.contiguous_format).view(2, 8, 32)
    v = m5.float().view(2, 8, 32)
    return (v * x).sum([0, 1]), v.sum([0, 1]), y


def test_a_row_kernels_variants_each_bind_their_own_view_sizes(device):
    # GPT-2's backward under bf16 autocast: a row kernel (sums over the batch) also stores a transposed
    # slice reshaped back. Its persistent and looped variants number their views differently, and the
    # launcher used to bind both from one dict, so one variant read the other's view sizes (nan, 1e38).
    # (Which variant numbers which view first follows the graph's node names: keep the program as is.)
    torch.manual_seed(0)
    args = (
        torch.randn(2, 4, 8, 8).bfloat16().to(device),
        torch.randn(2, 8, 4, 8).bfloat16().transpose(1, 2).to(device),
        torch.randn(16, 32).bfloat16().to(device),
        torch.randn(2, 8, 32).to(device),
    )
    compiled = torch.compile(_sums_beside_a_transposed_slice, backend="fuser")(*args)
    assert fuser.counters()["kernels_launched"] == 1
    assert _max_error(_sums_beside_a_transposed_slice(*args), compiled) < 1e-5


def test_batch_norm_statistics_that_eager_returns_in_float32_reach_kernels_as_traced(device):
    # CPU batch norm on bfloat16 saves float32 statistics where its meta kernel says bfloat16: the
    # backward kernel, generated for bfloat16, read float32 bytes (a shape error in the interpreter,
    # garbage on a GPU). Extern results now arrive in the dtype the graph was traced with.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    model = model.to(device)
    x = torch.randn(2, 3, 6, 6, device=device)
    cotangent = torch.randn(2, 8, 6, 6, device=device)

    def gradients(net):
        with torch.autocast(device, torch.bfloat16):
            y = net(x)
        (y.float() * cotangent).sum().backward()
        return [p.grad for p in net.parameters()]

    expected = gradients(copy.deepcopy(model))
    compiled = gradients(torch.compile(copy.deepcopy(model), backend="fuser"))
    scale = max(e.abs().max().item() for e in expected)
    assert _max_error(expected, compiled) < 0.05 * scale  # bfloat16 statistics, rounded once more
