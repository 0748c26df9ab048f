"""A forward op and the backward op that reads its saved outputs are decomposed together or not at all.

AOTAutograd decomposes below autograd, so a decomposed forward's outputs are what its backward op is fed
(`fuser/capture/autograd_pairs.py`). These tests walk the pairs torch's autograd formulas define, against the
table the backend really uses, and run every pair that table touches forward and backward on real
samples: the compiled result and every input's gradient must be as close to float64 as eager's are.
A torch upgrade that adds a pair the table touches fails `test_every_pair_the_table_touches_has_a_sample`
until someone writes its sample.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch._decomp import core_aten_decompositions
from torch.utils._python_dispatch import TorchDispatchMode

import fuser
from conformance.harness.oracle import compare
from fuser.capture.autograd_pairs import saved_output_pairs, split_pairs
from fuser.capture.backend import decomposition_table

aten = torch.ops.aten


@dataclass(frozen=True)
class PairSample:
    """A program that reaches `forward` (an aten overload's name) on `devices`, and its inputs.

    `inputs(dtype)` returns fresh tensors (float ones get requires_grad); `autocast` runs the program
    under bfloat16 autocast."""

    name: str
    forward: str
    program: Callable
    inputs: Callable[[torch.dtype], list]
    devices: tuple[str, ...] = ("cpu", "cuda")
    autocast: bool = False
    check: Callable | None = None  # a property check in place of the oracle (random ops)
    reference_dtype: torch.dtype = torch.float64  # float32 where the op has no float64 kernel


def _randn(*shape):
    return lambda dtype: [torch.randn(*shape, dtype=dtype)]


def _distinct(*shape):
    # Distinct values: no ties, so every index-returning op has one right answer.
    return lambda dtype: [(torch.randperm(torch.Size(shape).numel()).to(dtype) / 7 - 3).reshape(shape)]


def _attention(batch=2, heads=4, kv_heads=4, seq=9, kv_seq=9, dim=16, mask=False):
    def make(dtype):
        q = torch.randn(batch, heads, seq, dim, dtype=dtype)
        k, v = (torch.randn(batch, kv_heads, kv_seq, dim, dtype=dtype) for _ in range(2))
        # A boolean mask: flash attention on CPU takes it; a float mask that needs a gradient it does not.
        return [q, k, v, torch.rand(seq, kv_seq) < 0.7] if mask else [q, k, v]

    return make


def _batch_norm_inputs(dtype):
    return [torch.randn(6, 5, 3, dtype=dtype), torch.randn(5, dtype=dtype), torch.randn(5, dtype=dtype)]


def _with_stats(fn):
    # Running statistics are buffers, not differentiable inputs: made here so each run gets its own.
    def program(x, w, b):
        return fn(
            x,
            w,
            b,
            torch.zeros(5, dtype=x.dtype, device=x.device),
            torch.ones(5, dtype=x.dtype, device=x.device),
        )

    return program


def _dropout_uses_one_mask(inputs, outputs, grads) -> str:
    # Forward and backward must use the same mask: the gradient (of a cotangent with no zeros) is nonzero
    # exactly where the output kept x, scaled by 1/(1-p).
    (x,), (out,), (grad,) = inputs, outputs, grads
    kept = out != 0
    scale = 1 / (1 - 0.5)
    if not torch.equal(grad != 0, kept):
        return "the gradient's mask is not the forward's"
    if not torch.allclose(out[kept], x.detach()[kept] * scale):
        return "kept elements are not scaled by 1/(1-p)"
    fraction = kept.float().mean().item()
    return "" if 0.35 < fraction < 0.65 else f"kept {fraction:.2f} of the elements at p=0.5"


S = PairSample
SAMPLES = [
    S("cumprod", "aten.cumprod.default", lambda x: torch.cumprod(x, 1), _randn(4, 7)),
    S("cummax", "aten.cummax.default", lambda x: torch.cummax(x, 1).values, _distinct(4, 7)),
    S("cummin", "aten.cummin.default", lambda x: torch.cummin(x, 1).values, _distinct(4, 7)),
    S(
        "dropout",
        "aten.native_dropout.default",
        lambda x: aten.native_dropout(x, 0.5, True)[0],
        _randn(64, 33),
        check=_dropout_uses_one_mask,
    ),
    S(
        "fake_quantize_per_tensor",
        "aten.fake_quantize_per_tensor_affine_cachemask.default",
        lambda x: torch.fake_quantize_per_tensor_affine(x, 0.1, 3, -128, 127),
        _randn(5, 9),
    ),
    S(
        "fake_quantize_per_tensor_tensor_qparams",
        "aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default",
        lambda x: torch.fake_quantize_per_tensor_affine(
            # CUDA's kernel takes an int32 zero point only ("expected scalar type Int but found Long")
            x,
            torch.tensor(0.1, device=x.device),
            torch.tensor(3, dtype=torch.int32, device=x.device),
            -128,
            127,
        ),
        _randn(5, 9),
    ),
    S(
        "fake_quantize_per_channel",
        "aten.fake_quantize_per_channel_affine_cachemask.default",
        lambda x: torch.fake_quantize_per_channel_affine(
            x,
            torch.full((5,), 0.05, device=x.device),
            torch.zeros(5, dtype=torch.int32, device=x.device),
            0,
            -8,
            7,
        ),
        _randn(5, 9),
    ),
    S(
        "fused_moving_avg_obs_fake_quant",
        "aten._fused_moving_avg_obs_fq_helper.default",
        lambda x: torch.fused_moving_avg_obs_fake_quant(
            x,
            torch.ones(1, dtype=torch.long, device=x.device),
            torch.ones(1, dtype=torch.long, device=x.device),
            x.new_tensor([-1.0]),
            x.new_tensor([1.0]),
            x.new_tensor([0.05]),
            torch.tensor([0], dtype=torch.int32, device=x.device),
            0.01,
            -8,
            7,
            0,
        ),
        _randn(5, 9),
        reference_dtype=torch.float32,
    ),
    S("kthvalue", "aten.kthvalue.default", lambda x: torch.kthvalue(x, 3, 1).values, _distinct(4, 7)),
    S("max_dim", "aten.max.dim", lambda x: torch.max(x, 1).values, _distinct(4, 7)),
    S("min_dim", "aten.min.dim", lambda x: torch.min(x, 1).values, _distinct(4, 7)),
    S("median_dim", "aten.median.dim", lambda x: torch.median(x, 1).values, _distinct(4, 7)),
    S("nanmedian_dim", "aten.nanmedian.dim", lambda x: torch.nanmedian(x, 1).values, _distinct(4, 7)),
    S("mode", "aten.mode.default", lambda x: torch.mode(x, 1).values, _distinct(4, 7)),
    S("sort", "aten.sort.default", lambda x: torch.sort(x, 1).values, _distinct(4, 7)),
    S("sort_stable", "aten.sort.stable", lambda x: torch.sort(x, dim=1, stable=True).values, _distinct(4, 7)),
    S("topk", "aten.topk.default", lambda x: torch.topk(x, 3, 1).values, _distinct(4, 7)),
    S(
        "native_batch_norm",
        "aten.native_batch_norm.default",
        _with_stats(lambda x, w, b, rm, rv: aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)[0]),
        _batch_norm_inputs,
    ),
    S(
        "batch_norm_training",
        "aten._native_batch_norm_legit.default",
        _with_stats(
            lambda x, w, b, rm, rv: aten._native_batch_norm_legit(x, w, b, rm, rv, True, 0.1, 1e-5)[0]
        ),
        _batch_norm_inputs,
    ),
    S(
        "batch_norm_eval",
        "aten._native_batch_norm_legit_no_training.default",
        _with_stats(
            lambda x, w, b, rm, rv: aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)[0]
        ),
        _batch_norm_inputs,
    ),
    S(
        "batch_norm_no_stats",
        "aten._native_batch_norm_legit.no_stats",
        lambda x, w, b: aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)[0],
        _batch_norm_inputs,
    ),
    S(
        "cudnn_batch_norm",
        "aten.cudnn_batch_norm.default",
        _with_stats(lambda x, w, b, rm, rv: aten.cudnn_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)[0]),
        _batch_norm_inputs,
        devices=("cuda",),
    ),
    S(
        "layer_norm",
        "aten.native_layer_norm.default",
        lambda x, w, b: F.layer_norm(x, (7,), w, b),
        lambda d: [torch.randn(5, 7, dtype=d), torch.randn(7, dtype=d), torch.randn(7, dtype=d)],
    ),
    S(
        "rms_norm",
        "aten._fused_rms_norm.default",
        lambda x, w: aten._fused_rms_norm(x, [7], w, 1e-6)[0],
        lambda d: [torch.randn(5, 7, dtype=d), torch.randn(7, dtype=d)],
        devices=("cuda",),
    ),  # an op of its own on CUDA only; on CPU it is composite
    S(
        "group_norm",
        "aten.native_group_norm.default",
        lambda x, w, b: F.group_norm(x, 2, w, b),
        lambda d: [torch.randn(3, 6, 5, dtype=d), torch.randn(6, dtype=d), torch.randn(6, dtype=d)],
    ),
    S("sigmoid", "aten.sigmoid.default", torch.sigmoid, _randn(5, 7)),
    S("tanh", "aten.tanh.default", torch.tanh, _randn(5, 7)),
    S(
        "weight_norm_interface",
        "aten._weight_norm_interface.default",
        lambda v, g: aten._weight_norm_interface(v, g, 0)[0],
        lambda d: [torch.randn(4, 6, dtype=d), torch.rand(4, 1, dtype=d) + 0.5],
    ),
    S(
        "nll_loss",
        "aten.nll_loss_forward.default",
        lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, ignore_index=2),
        lambda d: [torch.randn(6, 5, dtype=d), torch.tensor([0, 2, 4, 1, 2, 3])],
    ),
    S(
        "nll_loss2d",
        "aten.nll_loss2d_forward.default",
        lambda x, t: F.nll_loss(
            F.log_softmax(x, 1), t, weight=torch.arange(1.0, 6.0, dtype=x.dtype, device=x.device)
        ),
        lambda d: [torch.randn(2, 5, 3, 4, dtype=d), torch.randint(0, 5, (2, 3, 4))],
    ),
    S("elu_", "aten.elu_.default", lambda x: F.elu(x * 2, inplace=True), _randn(5, 7)),
    S("celu_", "aten.celu_.default", lambda x: F.celu(x * 2, inplace=True), _randn(5, 7)),
    S("leaky_relu_", "aten.leaky_relu_.default", lambda x: F.leaky_relu(x * 2, inplace=True), _randn(5, 7)),
    S("log_sigmoid", "aten.log_sigmoid_forward.default", F.logsigmoid, _randn(5, 7)),
    S("log_softmax", "aten._log_softmax.default", lambda x: F.log_softmax(x, 1), _randn(5, 7)),
    S("softmax", "aten._softmax.default", lambda x: F.softmax(x, 1), _randn(5, 7)),
    S("safe_softmax", "aten._safe_softmax.default", lambda x: aten._safe_softmax(x, 1), _randn(5, 7)),
    S(
        "lstm_cell",
        "aten._thnn_fused_lstm_cell.default",
        # With biases: torch 2.11's fake lstm_cell on CUDA fails on None ones ("'NoneType' object has no
        # attribute 'device'", in Dynamo before any backend; the GPU run of session 19).
        lambda x, h, c, wi, wh, bi, bh: torch.lstm_cell(x, (h, c), wi, wh, bi, bh)[0],
        lambda d: [
            torch.randn(3, 4, dtype=d),
            torch.randn(3, 5, dtype=d),
            torch.randn(3, 5, dtype=d),
            torch.randn(20, 4, dtype=d),
            torch.randn(20, 5, dtype=d),
            torch.randn(20, dtype=d),
            torch.randn(20, dtype=d),
        ],
        devices=("cuda",),
    ),
    S(
        "gru_cell",
        "aten._thnn_fused_gru_cell.default",
        lambda x, h, wi, wh: torch.gru_cell(x, h, wi, wh),
        lambda d: [
            torch.randn(3, 4, dtype=d),
            torch.randn(3, 5, dtype=d),
            torch.randn(15, 4, dtype=d),
            torch.randn(15, 5, dtype=d),
        ],
        devices=("cuda",),
    ),
    # Not pairs the table touches today, but the families the bug class lives in (the list).
    S(
        "max_pool2d",
        "aten.max_pool2d_with_indices.default",
        lambda x: F.max_pool2d(x, 2),
        _distinct(2, 3, 6, 7),
    ),
    S(
        "adaptive_max_pool2d",
        "aten.adaptive_max_pool2d.default",
        lambda x: F.adaptive_max_pool2d(x, (2, 3)),
        _distinct(2, 3, 6, 7),
    ),
    S(
        "embedding_padding_idx",
        "aten.embedding.default",
        lambda w, i: F.embedding(i, w, padding_idx=1),
        lambda d: [torch.randn(6, 4, dtype=d), torch.tensor([[0, 1, 5], [1, 3, 3]])],
    ),
    S(
        "attention",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        F.scaled_dot_product_attention,
        _attention(),
        devices=("cpu",),
    ),
    S(
        "attention_causal",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        _attention(),
        devices=("cpu",),
    ),
    S(
        "attention_mask",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        _attention(kv_seq=11, mask=True),
        devices=("cpu",),
    ),
    S(
        "attention_gqa",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        _attention(heads=4, kv_heads=2),
        devices=("cpu",),
    ),
    S(
        "attention_bf16_autocast",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        lambda q, k, v: F.scaled_dot_product_attention(q * 1, k, v, is_causal=True),
        _attention(),
        devices=("cpu",),
        autocast=True,
    ),
    S(
        "attention_cuda",
        "aten._scaled_dot_product_efficient_attention.default",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        _attention(),
        devices=("cuda",),
    ),
]

# Pairs the table touches that no sample here runs, with the reason.
NOT_SAMPLED = {
    "aten.miopen_batch_norm.default": "ROCm's MIOpen only: no CPU or CUDA program reaches it",
    "aten._pack_padded_sequence.default": "AOTAutograd cannot trace it (aot_eager fails too: its traced "
    "lengths argument is a float tensor in torch 2.13)",
}


def _touched_forwards() -> set[str]:
    table = decomposition_table()
    return {str(p.forward) for p in saved_output_pairs() if p.forward in table or p.backward in table}


@pytest.mark.parametrize("foreach", [True, False])
def test_the_backend_decomposes_no_pair_by_halves(foreach):
    assert split_pairs(decomposition_table(foreach)) == []


def test_the_stock_core_table_splits_cpu_attention_which_the_backend_does_not():
    # The check finds the bug this file was written for: core_aten_decompositions() decomposes CPU flash
    # attention while its backward stays an op.
    split = {str(p.forward) for p in split_pairs(dict(core_aten_decompositions()))}
    assert "aten._scaled_dot_product_flash_attention_for_cpu.default" in split
    assert aten._scaled_dot_product_flash_attention_for_cpu.default not in decomposition_table()


def test_every_pair_the_table_touches_has_a_sample():
    sampled = {s.forward for s in SAMPLES}
    missing = sorted(_touched_forwards() - sampled - set(NOT_SAMPLED))
    assert not missing, f"pairs the decomposition table touches with no sample here: {missing}"


class _OpsSeen(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func))
        return func(*args, **(kwargs or {}))


def _inputs(sample: PairSample, dtype: torch.dtype, device: str) -> list:
    torch.manual_seed(0)
    made = [t.to(device) for t in sample.inputs(dtype)]
    return [t.requires_grad_() if t.is_floating_point() else t for t in made]


def _run(sample: PairSample, program: Callable, inputs: list):
    # Returns (outputs, gradients of the float inputs) for a seeded random cotangent.
    context = (
        torch.autocast(inputs[0].device.type, torch.bfloat16) if sample.autocast else contextlib.nullcontext()
    )
    torch.manual_seed(1)
    with context:
        outputs = program(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    leaves = [t for t in inputs if t.requires_grad]
    cotangents = [torch.randn(o.shape, dtype=o.dtype, device=o.device) for o in outputs]
    grads = torch.autograd.grad(outputs, leaves, cotangents, allow_unused=True)
    return tuple(o.detach() for o in outputs), tuple(grads)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_a_pair_runs_forward_and_backward_as_eager_does(sample: PairSample, device: str):
    if device not in sample.devices:
        pytest.skip(f"{sample.forward} is reached only on {', '.join(sample.devices)}")
    watcher = _OpsSeen()
    with watcher:
        expected_outputs, expected_grads = _run(
            sample, sample.program, _inputs(sample, torch.float32, device)
        )
    assert sample.forward in watcher.ops, f"the sample does not reach {sample.forward} on {device}"

    compiled = torch.compile(sample.program, backend="fuser", fullgraph=True)
    inputs = _inputs(sample, torch.float32, device)
    outputs, grads = _run(sample, compiled, inputs)
    assert fuser.counters()["graphs_compiled"] == 2, "forward and backward graphs are compiled by the fuser"

    if sample.check is not None:
        problem = sample.check(inputs, outputs, grads)
        assert not problem, problem
        return
    reference = _run(sample, sample.program, _inputs(sample, sample.reference_dtype, device))
    verdict = compare((outputs, grads), (expected_outputs, expected_grads), reference)
    assert verdict.ok, verdict.message


def test_a_cumprod_gradient_runs_by_default_though_its_trace_takes_argmax_over_bool():
    # torch's cumprod backward takes argmax(x == 0): no eager kernel takes bool, so with argmax not
    # validated for bool the default configuration raised; the fuser reads the mask as uint8.
    x = torch.randn(5, 7, requires_grad=True)
    x.data[1, 3] = 0.0
    compiled = fuser.compile(lambda t: torch.cumprod(t, 1), dynamic=False)
    compiled(x).sum().backward()
    expected = x.detach().clone().requires_grad_()
    torch.cumprod(expected, 1).sum().backward()
    torch.testing.assert_close(x.grad, expected.grad)
