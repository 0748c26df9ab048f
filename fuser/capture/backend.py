"""Capture wiring: the `fuser` torch.compile backend.

Dynamo hands over an FX graph of torch calls; AOTAutograd traces it to aten (forward and, when inputs
need gradients, backward), decomposing to core aten except for ops the op table lowers directly. Each
resulting graph goes to `fuser.compiler.compile_graph`.
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._decomp.decompositions import pw_cast_for_opmath
from torch._functorch.aot_autograd import aot_module_simplified
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch.fx.experimental.symbolic_shapes import statically_known_true

from fuser.capture.autograd_pairs import split_pairs
from fuser.capture.foreach import foreach_decompositions
from fuser.capture.rewrites import rewrite
from fuser.compiler import compile_graph
from fuser.lower.ops import INDEXED_BY_OVERLOAD, POINTWISE_BY_OVERLOAD, SCATTER_BY_OVERLOAD, VIEW_BY_OVERLOAD
from fuser.lower.reductions import REDUCTION_BY_OVERLOAD
from fuser.options import Options
from fuser.runtime import compile_pool

aten = torch.ops.aten

# Composite ops that reach the fuser as their parts: normalizations and softmax become reductions plus
# pointwise ops, and their backward ops likewise, so one row kernel can hold each of them.
COMPOSITES = [
    aten._softmax,
    aten._log_softmax,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm,
    aten.native_layer_norm_backward,
    aten.native_group_norm,
    aten._fused_rms_norm,
    aten.gelu_backward,
    aten.silu_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.var_mean.correction,
    aten.var.correction,
    aten.std.correction,
    aten.mean.dim,
    aten.mean.default,
    aten.logsumexp,
    aten.linalg_vector_norm,
]


def _max_dim(x: torch.Tensor, dim: int, keepdim: bool = False):
    # Values and indices are two reductions of one row: amax (nan-propagating) and argmax (first index).
    return aten.amax.default(x, [dim], keepdim), aten.argmax.default(x, dim, keepdim)


def _min_dim(x: torch.Tensor, dim: int, keepdim: bool = False):
    return aten.amin.default(x, [dim], keepdim), aten.argmin.default(x, dim, keepdim)


@pw_cast_for_opmath
def _sigmoid_backward(grad: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # ATen's kernels multiply in this order, (grad * (1 - y)) * y; the stock decomposition's
    # grad * (y * (1 - y)) overflows first at |y| near max (0 * -inf = nan where eager gives a signed 0).
    # In the common dtype's opmath, as ATen's kernels: a bfloat16 y beside a float16 grad (a float32 result)
    # rounded 1 - y to bfloat16 first, 153 float32 ulps from eager (the conformance full tier, session 37).
    return grad * (1 - y) * y


_STOCK_LOGIT_BACKWARD = get_decompositions([aten.logit_backward])[aten.logit_backward.default]


@pw_cast_for_opmath
def _logit_backward(grad: torch.Tensor, x: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    # ATen's kernels give 0 only where x < eps or x > 1 - eps, so a nan x gives nan (CUDA's kernel and the
    # CPU scalar loop; the CPU vectorized loop gives 0, and the conformance spec leaves nan unspecified).
    # The stock decomposition keeps x >= eps and x <= 1 - eps instead, which maps nan to 0 on every device.
    if eps is None:
        return _STOCK_LOGIT_BACKWARD(grad, x)
    outside = torch.logical_or(x < eps, x > 1.0 - eps)
    return torch.where(outside, 0.0, grad / (x * (1.0 - x)))


@pw_cast_for_opmath
def _hardtanh_backward(grad: torch.Tensor, x: torch.Tensor, min_val: float, max_val: float) -> torch.Tensor:
    # ATen's kernels compare x, widened to float, with the float bounds. torch 2.11's decomposition compares
    # a half x with the bounds rounded to its dtype (0.1 -> 0.09998 in float16), so x = float16(0.1) got a
    # zero gradient (seen on the H200); torch 2.13's compares in float, as this does on every version.
    return torch.where((x <= min_val) | (x >= max_val), 0.0, grad)


def _nll_loss_backward(stock):
    # ATen's kernels write each row's gradient at its target and leave the rest 0; the stock decompositions
    # multiply a one-hot tensor by the gradient, so a nan or inf gradient of a row's loss made the whole
    # row nan (0 * nan), where eager's is nan at the target alone (found by the full conformance tier).
    def backward(grad, x, target, weight, reduction, ignore_index, total_weight):
        full = stock(grad, x, target, weight, reduction, ignore_index, total_weight)
        channel_dim = 0 if x.dim() < 2 else 1
        target = (target[0] if x.dim() == 1 and target.dim() > 0 else target).unsqueeze(channel_dim)
        safe_target = torch.where(target != ignore_index, target, 0)
        picked = torch.scatter(torch.zeros_like(x), channel_dim, safe_target, 1.0) != 0
        return torch.where(picked & (target != ignore_index), full, 0.0)

    return backward


NONE, MEAN = 0, 1  # torch.nn._reduction.get_enum("none"), ("mean")


@pw_cast_for_opmath
def _smooth_l1_loss_backward(grad, x, target, reduction: int, beta: float):
    # ATen's kernels: -norm * grad below -beta, norm * grad above beta, else norm * (x - target) / beta * grad
    # (the CPU's vectorized loop's order). A nan difference falls to the last branch (nan); the stock
    # decomposition's sign(nan) is 0, so a nan input got a 0 gradient (found under a ledger entry of the CPU's
    # that hid it). The CPU's bounds are inclusive and CUDA's strict: at beta = 0 a zero difference is
    # -norm * grad on the CPU and 0 / 0 = nan on CUDA.
    norm = 1.0 / x.numel() if reduction == MEAN else 1.0  # a zero-size mean: `_empty_mean_safe`
    difference = x - target
    scaled = norm * grad
    if x.device.type == "cuda":
        below, above = difference < -beta, difference > beta
    else:
        below, above = difference <= -beta, difference >= beta
    return torch.where(below, -scaled, torch.where(above, scaled, norm * (difference / beta) * grad))


def _empty_mean_safe(stock):
    # The stock decompositions compute 1 / numel in Python while tracing: a zero-size input with
    # reduction='mean' raised ZeroDivisionError at compile time, where eager returns the empty gradient
    # (which 'none' gives as well: the formula is elementwise).
    def backward(grad, x, target, reduction: int, *rest):
        if reduction == MEAN and statically_known_true(x.numel() == 0):
            reduction = NONE
        return stock(grad, x, target, reduction, *rest)

    return backward


_STOCK_LAYER_NORM = get_decompositions([aten.native_layer_norm])[aten.native_layer_norm.default]


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    # Over zero elements eager's mean is 0 (its row moments start at 0); the decomposition's is 0/0 = nan.
    out, mean, rstd = _STOCK_LAYER_NORM(x, normalized_shape, weight, bias, eps)
    if statically_known_true(math.prod(normalized_shape) == 0):
        mean = torch.zeros_like(mean)
    return out, mean, rstd


_STOCK_LAYER_NORM_BACKWARD = get_decompositions([aten.native_layer_norm_backward])[
    aten.native_layer_norm_backward.default
]


def _native_layer_norm_backward(grad, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    # The CPU's half-precision layer norm saves a half mean and rstd; the decomposition computed rstd / N in
    # that dtype (a float16 subnormal past N = 16,384: the input's gradient 0.3% off at 70,001 columns, 6x
    # eager's error; found by the full conformance tier). ATen's kernels compute in float.
    wide = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in (mean, rstd)]
    return _STOCK_LAYER_NORM_BACKWARD(grad, x, normalized_shape, *wide, weight, bias, output_mask)


_STOCK_GROUP_NORM = get_decompositions([aten.native_group_norm])[aten.native_group_norm.default]


def _native_group_norm(x, weight, bias, batch, channels, inner, groups, eps):
    # The stock decomposition's CPU branch folds the moments into a scale and a shift, x * (rstd * w) +
    # (b - mean * rstd * w): where rstd is large (groups of one element: 1 / sqrt(eps) = 316) the two terms
    # cancel, 3x eager's error (found by the full tier). Normalize first, as its other branch does.
    wide = x if x.dtype in (torch.float32, torch.float64) else x.float()
    out, mean, rstd = _STOCK_GROUP_NORM(wide, None, None, batch, channels, inner, groups, eps)
    per_channel = [1, channels] + [1] * (x.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    return out.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype)


# Whether a norm's decomposition is running: its moments keep the input's precision (below).
_IN_NORM = contextvars.ContextVar("fuser_in_norm", default=False)
# The ops whose moments run in double on the CPU, and the norms whose decompositions (in this table) compute
# moments of their own.
MOMENTS = {aten.var, aten.std, aten.var_mean, aten.std_mean}
NORMS = {aten.native_layer_norm, aten.layer_norm, aten.native_group_norm, aten.group_norm, aten.instance_norm}
CPU_DOUBLE_MOMENTS = (torch.float32, torch.float16, torch.bfloat16)


def _moments_in_double_on_cpu(stock: Callable) -> Callable:
    """ATen's CPU kernels of var, std, var_mean and std_mean accumulate in double and round once at the end
    (a float32 std of values near 1e21, whose squares overflow float32, is finite there; the fuser's float32
    sum of squares was inf: found by the fuzzer); CUDA's accumulate in the input's float. Its norm kernels
    accumulate in float on both, so a norm's decomposition keeps the stock moments."""

    def decomposition(x, *args, **kwargs):
        if x.device.type != "cpu" or x.dtype not in CPU_DOUBLE_MOMENTS or _IN_NORM.get():
            return stock(x, *args, **kwargs)
        result = stock(x.double(), *args, **kwargs)
        return tuple(r.to(x.dtype) for r in result) if isinstance(result, tuple) else result.to(x.dtype)

    return decomposition


def _norm(stock: Callable) -> Callable:
    def decomposition(*args, **kwargs):
        token = _IN_NORM.set(True)
        try:
            return stock(*args, **kwargs)
        finally:
            _IN_NORM.reset(token)

    return decomposition


def _copy(target: torch.Tensor, source: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    # `x.copy_(y)` reaches AOTAutograd as copy_(x, copy(x, y)). As Inductor does, copy is y in x's dtype
    # (and shape): the kernel that stores y can then store it straight into x (`fuser.plan.inplace`).
    value = source.to(dtype=target.dtype, device=target.device)
    return value if value.shape == target.shape else value.expand(target.shape).clone()


# Ops left to eager whole, not decomposed: the fuser lowers none of their parts that matter, and their
# decompositions compute differently. index_add's multiplies source by alpha before index_put accumulates
# (2 * 3.4e38 overflows, and -inf + inf is nan), where ATen's kernel fuses the multiply into the add.
# linspace's and logspace's compute in float32 over an iota, where ATen's kernels compute an integer
# range from truncated ends in double with fused multiply-adds (linspace(-3.3, 7.9, 7) is
# [-3, -1, 0, 1, 3, 5, 7], the decomposition's [-3, -1, 0, 2, 4, 6, 7]) and a half one in the half
# dtype's own arithmetic: a range is written once, so eager's kernel costs one small launch.
# eye's decomposition picks its index dtype by size (uint16 past 255) and eager has no uint16 arange on
# CPU, so the eager call of that arange raised. index_fill's hands its 0-d value tensor to index_put in
# the value's own dtype (a float64 value into a float32 tensor raises at run time), where ATen's kernel
# casts it; eager's kernel is one launch and the fuser has nothing to fuse into it.
EAGER_WHOLE = [
    aten.index_add.default,
    aten.linspace.default,
    aten.logspace.default,
    aten.eye.default,
    aten.eye.m,
    aten.index_fill.int_Scalar,
    aten.index_fill.int_Tensor,
]


@functools.cache
def decomposition_table(foreach: bool = True) -> dict:
    """Core aten decompositions plus `COMPOSITES` and (with `foreach`, where horizontal fusion will
    batch their per-tensor kernels) the foreach ops (`fuser.capture.foreach`), minus those of
    ops the fuser lowers whole or leaves to eager whole (`EAGER_WHOLE`), and minus the forward of every
    pair the table would split: a forward decomposed while the backward op that reads its saved outputs
    stays an op (`fuser.capture.autograd_pairs`)."""
    lowered = {
        *POINTWISE_BY_OVERLOAD,
        *VIEW_BY_OVERLOAD,
        *SCATTER_BY_OVERLOAD,
        *INDEXED_BY_OVERLOAD,
        *REDUCTION_BY_OVERLOAD,
        *EAGER_WHOLE,
    }
    table = {**core_aten_decompositions(), **get_decompositions(COMPOSITES)}
    if foreach:
        table |= foreach_decompositions()
    table[aten.max.dim] = _max_dim
    table[aten.min.dim] = _min_dim
    table[aten.sigmoid_backward.default] = _sigmoid_backward
    table[aten.logit_backward.default] = _logit_backward
    table[aten.hardtanh_backward.default] = _hardtanh_backward
    table[aten.native_layer_norm.default] = _native_layer_norm
    table[aten.native_group_norm.default] = _native_group_norm
    table[aten.native_layer_norm_backward.default] = _native_layer_norm_backward
    for op in (aten.nll_loss_backward.default, aten.nll_loss2d_backward.default):
        table[op] = _nll_loss_backward(table[op])
    table[aten.smooth_l1_loss_backward.default] = _smooth_l1_loss_backward
    for op in (
        aten.mse_loss_backward.default,
        aten.huber_loss_backward.default,
        aten.smooth_l1_loss_backward.default,
    ):
        table[op] = _empty_mean_safe(table[op])
    for op, fn in table.items():
        if op.overloadpacket in MOMENTS:
            table[op] = _moments_in_double_on_cpu(fn)
        elif op.overloadpacket in NORMS:
            table[op] = _norm(fn)
    table[aten.copy.default] = _copy
    table = {op: fn for op, fn in table.items() if op not in lowered}
    for pair in split_pairs(table):
        table.pop(pair.forward, None)
    return table


def fuser_backend(
    graph_module: torch.fx.GraphModule,
    example_inputs: list[Any],
    options: dict[str, Any] | None = None,
    mode: str | None = None,
) -> Callable:
    """The `fuser` backend: `torch.compile(fn, backend="fuser", options={"strict": True})`."""
    if mode is not None:
        raise ValueError(f"fuser: torch.compile mode {mode!r} is not supported; the fuser has no modes")
    chosen = Options.from_dict(options)
    # The compile workers (FUSER_COMPILE_WORKERS, the default pool) start now, importing torch and Triton
    # while AOTAutograd traces, rather than at the first graph's kernels, where the first launch would wait.
    compile_pool.start_for(example_inputs)
    forward = functools.partial(compile_graph, options=chosen)
    backward = functools.partial(compile_graph, options=chosen, backward=True)
    return aot_module_simplified(
        rewrite(graph_module),
        example_inputs,
        fw_compiler=forward,
        bw_compiler=backward,
        decompositions=decomposition_table(foreach=chosen.fuse and chosen.horizontal),
        keep_inference_input_mutations=True,
        **({"partition_fn": min_cut_rematerialization_partition} if chosen.recompute else {}),
    )
