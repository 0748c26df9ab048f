"""Specs of extern-heavy ops a fusing backend usually leaves to a library or to eager: attention,
convolutions, pooling and resampling.

What is checked is that what the backend does not fuse comes back right in fused neighbourhoods: the
contexts put a pointwise producer before these ops and a consumer or a reduction after them, and
backward runs through them. Inputs are read as images (N, C, H, W): a 4-d sample as it is (contiguous
and channels-last), a 2-d one as one image of one channel; attention reads the last two dims as
(sequence, features).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.specs import OpSpec, shaped_spec
from conformance.specs.values import FLOATING

Calls = list[tuple[tuple, dict[str, Any]]]


def _fallback(op: str, args: Callable, **fields) -> OpSpec:
    return shaped_spec(op, "fallback", args, dtypes=FLOATING, **fields)


def _image(x: torch.Tensor) -> torch.Tensor | None:
    """x as (N, C, H, W) with H, W >= 2: a 4-d x as is, a 2-d one as one image of one channel."""
    if x.dim() == 2 and min(x.shape) >= 2:
        return x.reshape(1, 1, *x.shape)
    if x.dim() == 4 and min(x.shape[2:]) >= 2 and x.shape[1] and x.shape[0]:
        return x
    return None


def _small(x: torch.Tensor, make, shape, position: int) -> torch.Tensor:
    """Weights: moderate values (no specials), so a sum over a window stays finite and order-free-ish."""
    return make(shape, x.dtype.__str__().removeprefix("torch."), position=position, specials=False)


def sdpa_calls(x, make) -> Calls:
    """x as the query; keys and values of another length; causal, a boolean and an additive mask, a
    scale, and grouped heads for a 4-d x."""
    if x.dim() < 2 or min(x.shape[-2:]) == 0 or x.shape[-1] > 64:
        return []
    query = x
    length = x.shape[-2] + 3
    key = _small(x, make, (*x.shape[:-2], length, x.shape[-1]), 1)
    value = _small(x, make, (*x.shape[:-2], length, 5), 2)
    keep = make((x.shape[-2], length), "bool", position=3)
    keep[:, 0] = True  # every query sees at least one key (a row of -inf only gives nan)
    bias = _small(x, make, (x.shape[-2], length), 4)
    square_key = _small(x, make, x.shape, 5)
    calls = [
        ((query, key, value), {}),
        ((query, square_key, square_key), {"is_causal": True}),
        ((query, key, value), {"attn_mask": keep}),
        ((query, key, value), {"attn_mask": bias, "scale": 0.3}),
    ]
    if x.dim() == 4:
        grouped = _small(x, make, (x.shape[0], 1, length, x.shape[-1]), 6)
        calls.append(((query, grouped, grouped), {"enable_gqa": True}))
    return calls


def _conv_weight(image, make, out_channels: int, groups: int, kernel: int) -> torch.Tensor:
    return _small(image, make, (out_channels, image.shape[1] // groups, kernel, kernel), 1)


def conv2d_calls(x, make) -> Calls:
    """3x3 with padding and a bias, stride 2, dilation 2, and depthwise (groups = channels)."""
    image = _image(x)
    if image is None:
        return []
    c = image.shape[1]
    bias = _small(image, make, (4,), 2)
    calls = [((image, _conv_weight(image, make, 4, 1, 3), bias, [1, 1], [1, 1]), {})]
    calls.append(((image, _conv_weight(image, make, 4, 1, 2), None, [2, 2], [0, 0]), {}))
    calls.append(((image, _conv_weight(image, make, 4, 1, 2), None, [1, 1], [1, 1], [2, 2]), {}))
    calls.append(((image, _conv_weight(image, make, c, c, 3), None, [1, 1], [1, 1], [1, 1], c), {}))
    return calls


def conv2d_same_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    return [((image, _conv_weight(image, make, 2, 1, 3)), {"padding": "same"})]


def convolution_calls(x, make) -> Calls:
    """The aten op every convolution becomes: forward and transposed."""
    image = _image(x)
    if image is None:
        return []
    c = image.shape[1]
    weight = _conv_weight(image, make, 4, 1, 3)
    transposed = _small(image, make, (c, 3, 3, 3), 3)
    return [
        ((image, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}),
        ((image, transposed, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1), {}),
    ]


def conv_transpose_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    c = image.shape[1]
    weight = _small(image, make, (c, 2, 3, 3), 1)
    return [
        (
            (image, weight, _small(image, make, (2,), 2)),
            {"stride": [2, 2], "padding": [1, 1], "output_padding": [1, 1]},
        ),
        ((image, weight), {}),
    ]


def max_pool_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    return [((image, [2, 2]), {}), ((image, [3, 2], [2, 1], [1, 1], [1, 1], True), {})]


def avg_pool_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    return [
        ((image, [2, 2]), {}),
        ((image, [3, 3], [2, 2], [1, 1], True, False), {}),
        ((image, [2, 2], [1, 1], [0, 0], False, True, 3), {}),
    ]


def avg_pool1d_calls(x, make) -> Calls:
    if x.dim() != 3 and x.dim() != 2:
        return []
    rows = x if x.dim() == 3 else x.unsqueeze(0)
    if rows.shape[-1] < 3:
        return []
    return [((rows, [3]), {}), ((rows, [2], [1], [1], True, False), {})]


def adaptive_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    return [((image, [1, 1]), {}), ((image, [3, 2]), {})]


def upsample_nearest_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    return [((image, None, [2.0, 2.0]), {}), ((image, [7, 3], None), {})]


def upsample_bilinear_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    return [((image, None, False, [2.0, 1.5]), {}), ((image, [7, 3], True, None), {})]


def pixel_shuffle_calls(x, make) -> Calls:
    image = _image(x)
    if image is None:
        return []
    return [((image.repeat(1, 4, 1, 1), 2), {})]


def fallback_specs() -> list[OpSpec]:
    return [
        _fallback("scaled_dot_product_attention.default", sdpa_calls),
        _fallback("conv2d.default", conv2d_calls),
        _fallback("conv2d.padding", conv2d_same_calls),
        _fallback("convolution.default", convolution_calls),
        _fallback("conv_transpose2d.input", conv_transpose_calls),
        _fallback("max_pool2d.default", max_pool_calls),
        _fallback("max_pool2d_with_indices.default", max_pool_calls),
        _fallback("avg_pool2d.default", avg_pool_calls),
        _fallback("avg_pool1d.default", avg_pool1d_calls),
        _fallback("adaptive_avg_pool2d.default", adaptive_calls),
        _fallback("_adaptive_avg_pool2d.default", adaptive_calls),
        _fallback("adaptive_max_pool2d.default", adaptive_calls),
        _fallback("upsample_nearest2d.vec", upsample_nearest_calls),
        _fallback("upsample_bilinear2d.vec", upsample_bilinear_calls),
        _fallback("_upsample_nearest_exact2d.vec", upsample_nearest_calls),
        _fallback("pixel_shuffle.default", pixel_shuffle_calls),
    ]
