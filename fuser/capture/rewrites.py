"""Calls in Dynamo's graph replaced, before AOTAutograd, by torch code that computes what eager computes.

For an op whose PyTorch decomposition is registered at the Autograd key (`py_impl(DispatchKey.Autograd)`),
AOTAutograd's tracing runs that decomposition before any decomposition table is consulted, so neither
`decomposition_table` nor leaving the op to eager whole changes what the fuser gets. Where the stock
decomposition computes differently from eager, the call is swapped here, in the graph Dynamo hands over:
for torch code that computes what eager does (multi_margin_loss), or for an opaque op that runs eager's
kernels forward and backward (the resampling ops, which the fuser would not fuse anyway: conformance's
"fallback" category).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch._prims_common import suggest_memory_format
from torch.nn import _reduction

aten = torch.ops.aten
MEAN, SUM = _reduction.get_enum("mean"), _reduction.get_enum("sum")


def _multi_margin_loss(x, target, p=1, margin=1, weight=None, reduction=MEAN):
    # ATen's kernels add a class's term only where margin - x[y] + x[j] > 0, so a nan term (a nan score, or
    # inf - inf) adds nothing; the stock decomposition clamps the term, and nan stays nan (eager inf or
    # finite, decomposed nan: the conformance full tier). The term is masked before it is squared or
    # weighted, so that a masked -inf (squared) or an inf weight leaves no nan in the value or the gradient.
    # In float for half scores, as ATen's kernels accumulate (the loss is rounded once, at the end).
    dtype = x.dtype
    x = torch.atleast_2d(x.float() if dtype in (torch.float16, torch.bfloat16) else x)
    target = torch.atleast_1d(target).unsqueeze(1)
    z = margin - torch.gather(x, 1, target) + x
    counted = (z > 0) & (torch.arange(x.shape[1], device=x.device) != target)
    term = torch.where(counted, z, 0)
    term = term if p == 1 else term * term
    if weight is not None:
        term = torch.where(counted, term * torch.atleast_1d(weight).to(x.dtype)[target], 0)
    if reduction == MEAN:
        return term.mean().to(dtype)
    if reduction == SUM:
        return (term.sum() / x.shape[1]).to(dtype)
    return term.mean(dim=1).to(dtype)


def _functional_multi_margin_loss(
    x, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"
):
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce)
    return _multi_margin_loss(x, target, p, margin, weight, _reduction.get_enum(reduction))


def _opaque(name: str, forward, backward, aligned: bool):
    """`forward` (a resampling op's .vec overload) as the opaque op `fuser::<name>`, its gradient the opaque
    op `fuser::<name>_backward` running `backward`: eager's kernels, whole. Their decompositions (at the
    Autograd key, so no table keeps them whole) weigh an infinite neighbour by 0 (0 * inf = nan where eager's
    bilinear kernel reads the pixel alone), and the nearest-exact gradient missed rows on CUDA
    (docs/conformance.md). Called with .vec's arguments: (x, output_size, [align_corners,] scale_factors)."""

    # Each result in the memory format its input suggests, on every device and in the fake kernels alike: the
    # fuser plans its kernels on the fake strides, and on CUDA eager's kernel and the meta kernel disagreed
    # for some inputs (channels-last results planned as contiguous, on an H100).
    def eager_forward(
        x: Tensor, size: list[int] | None, align: bool | None, scales: list[float] | None
    ) -> Tensor:
        result = forward(x, size, align, scales) if aligned else forward(x, size, scales)
        return result.contiguous(memory_format=suggest_memory_format(x))

    def eager_backward(
        grad: Tensor, size: list[int], input_size: list[int], align: bool | None, scales: list[float] | None
    ) -> Tensor:
        by_dim = (None, None) if scales is None else tuple(scales)
        if aligned:
            result = backward(grad, size, input_size, align, *by_dim)
        else:
            result = backward(grad, size, input_size, *by_dim)
        return result.contiguous(memory_format=suggest_memory_format(grad))

    forward_op = torch.library.custom_op(f"fuser::{name}", eager_forward, mutates_args=())
    backward_op = torch.library.custom_op(f"fuser::{name}_backward", eager_backward, mutates_args=())
    forward_op.register_fake(eager_forward)  # the meta kernels' shapes; the format as above
    backward_op.register_fake(eager_backward)

    def save(ctx, inputs, output):
        x, _, ctx.align, ctx.scales = inputs
        ctx.size, ctx.input_size = list(output.shape[-2:]), list(x.shape)

    def gradient(ctx, grad):
        return backward_op(grad, ctx.size, ctx.input_size, ctx.align, ctx.scales), None, None, None

    forward_op.register_autograd(gradient, setup_context=save)
    return forward_op


def _vec_call(original, opaque, aligned: bool):
    """`original` (a .vec overload, or torch._C._nn's function taking either overload's arguments) calling
    `opaque` where its arguments are .vec's, and itself otherwise (the size overload is not swapped)."""
    names = ("output_size", "align_corners", "scale_factors") if aligned else ("output_size", "scale_factors")

    def call(x, *args, **kwargs):
        values = dict(zip(names, args, strict=False)) | kwargs
        scales = values.get("scale_factors")
        if len(args) > len(names) or values.keys() != set(names) or isinstance(scales, float):
            return original(x, *args, **kwargs)
        return opaque(x, values["output_size"], values.get("align_corners"), scales)

    return call


# name -> (the gradient's aten op, whether it takes align_corners)
RESAMPLING = {
    "upsample_bilinear2d": (aten.upsample_bilinear2d_backward.default, True),
    "upsample_nearest2d": (aten.upsample_nearest2d_backward.default, False),
    "_upsample_nearest_exact2d": (aten._upsample_nearest_exact2d_backward.default, False),
}
_NN = torch._C._nn
_NN_ORIGINALS = {name: getattr(_NN, name) for name in RESAMPLING}
_SWAPPED = {}  # torch._C._nn's name -> its call of the opaque op
_OPAQUE_BY_VEC = {}  # the .vec overload -> its call of the opaque op
for _name, (_backward, _aligned) in RESAMPLING.items():
    _vec = getattr(aten, _name).vec
    _op = _opaque(_name.lstrip("_"), _vec, _backward, _aligned)
    _SWAPPED[_name] = _vec_call(_NN_ORIGINALS[_name], _op, _aligned)
    _OPAQUE_BY_VEC[_vec] = _vec_call(_vec, _op, _aligned)


def _resampling_left_to_eager(function):
    """`function` (F.interpolate, which Dynamo keeps whole in its graph) run with torch._C._nn's resampling
    calls swapped for the opaque ops while AOTAutograd traces it. The swap is process-wide for the call, but
    harmless to a call in another thread: the opaque ops compute eager's answer with eager's kernels."""

    def call(*args, **kwargs):
        for name, swapped in _SWAPPED.items():
            setattr(_NN, name, swapped)
        try:
            return function(*args, **kwargs)
        finally:
            for name, original in _NN_ORIGINALS.items():
                setattr(_NN, name, original)

    return call


REWRITES = {
    F.multi_margin_loss: _functional_multi_margin_loss,
    torch._C._nn.multi_margin_loss: _multi_margin_loss,
    aten.multi_margin_loss: _multi_margin_loss,
    aten.multi_margin_loss.default: _multi_margin_loss,
}


REWRITES |= _OPAQUE_BY_VEC
REWRITES |= {_NN_ORIGINALS[name]: swapped for name, swapped in _SWAPPED.items()}
REWRITES |= {
    f: _resampling_left_to_eager(f)
    for f in (F.interpolate, F.upsample, F.upsample_bilinear, F.upsample_nearest)
}


def rewrite(graph_module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Swaps the calls `REWRITES` names, in place (Dynamo already checked their arguments on fake tensors)."""
    swapped = False
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in REWRITES:
            node.target = REWRITES[node.target]
            swapped = True
    if swapped:
        graph_module.recompile()
    return graph_module
