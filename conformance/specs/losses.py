"""Specs of loss functions: what a training step ends with, forward and backward.

The sample's input `x` is the prediction (logits, log-probabilities, or values); targets are made to
fit it: class indices with some set to the ignored index, probabilities that sum to one per row,
values in (0, 1) where the loss takes probabilities. Every loss runs with each reduction (0 none,
1 mean, 2 sum), and class losses with and without per-class weights, with ignored targets and with
label smoothing. Losses over class rows read x as (N, C): a 1-d x is one row of C classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.specs import OpSpec, shaped_spec
from conformance.specs.values import FLOATING

Calls = list[tuple[tuple, dict[str, Any]]]
REDUCTIONS = (0, 1, 2)  # none, mean, sum
IGNORED = -100  # the default ignore_index


def _loss(op: str, args: Callable, *, differentiable: bool = True, **fields) -> OpSpec:
    return shaped_spec(op, "loss", args, dtypes=FLOATING, differentiable=differentiable, **fields)


def _rows(x: torch.Tensor) -> torch.Tensor | None:
    """x as (N, C) class scores: a 1-d x is one row; 0-d, zero-class and higher-rank xs are not."""
    if x.dim() == 1:
        return x.unsqueeze(0) if x.numel() else None
    if x.dim() == 2 and x.shape[1] > 0:
        return x
    return None


def _classes(rows: torch.Tensor, make, ignored: int = IGNORED) -> torch.Tensor:
    """One class index per row, seeded, the first row's set to `ignored` (when there is a second row)."""
    n, c = rows.shape
    target = make((n,), "int64", position=1, specials=False, domain=(0, c - 1))
    if n > 1:
        target[0] = ignored
    return target


def _weights(c: int, make) -> torch.Tensor:
    return make((c,), position=2, specials=False, domain=(0.1, 2.0))


def nll_calls(x, make) -> Calls:
    """Reductions without weights; weights with mean (the weighted mean divides by the kept weight);
    an ignore_index that is a real class."""
    rows = _rows(x)
    if rows is None:
        return []
    c = rows.shape[1]
    target = _classes(rows, make)
    calls = [((rows, target, None, reduction, IGNORED), {}) for reduction in REDUCTIONS]
    calls.append(((rows, target, _weights(c, make), 1, IGNORED), {}))
    calls.append(((rows, target.clamp(min=0), None, 1, 0), {}))
    return calls


def nll_keyword_calls(x, make) -> Calls:
    """nll_loss and nll_loss_nd take the same arguments, by keyword."""
    names = ("weight", "reduction", "ignore_index")
    return [
        ((rows, target), dict(zip(names, rest, strict=True)))
        for (rows, target, *rest), _ in nll_calls(x, make)
    ]


def nll_backward_calls(x, make) -> Calls:
    """The backward of each nll_loss_forward call, with the total weight the forward returns."""
    calls = []
    for (rows, target, weight, reduction, ignored), _ in nll_calls(x, make):
        with torch.no_grad():
            out, total = torch.ops.aten.nll_loss_forward(rows, target, weight, reduction, ignored)
        grad = make(out.shape, position=4, specials=False)
        calls.append(((grad, rows, target, weight, reduction, ignored, total), {}))
    return calls


def nll2d_calls(x, make) -> Calls:
    """(N, C, H, W) scores with (N, H, W) targets."""
    if x.dim() != 4 or x.shape[1] == 0:
        return []
    n, c, h, w = x.shape
    target = make((n, h, w), "int64", position=1, specials=False, domain=(0, c - 1))
    target[0, 0, 0] = IGNORED
    return [((x, target, None, reduction, IGNORED), {}) for reduction in REDUCTIONS]


def _loss_only(args, kwargs) -> tuple[int, ...]:
    return (0,)


def nll2d_results(args, kwargs) -> tuple[int, ...]:
    """Without a reduction, CUDA's nll_loss2d never writes total_weight: eager returns whatever its memory
    held (0.008 and 0.174 in one run on an H200, 2026-11-29), so only the loss is checked there."""
    return (0,) if args[3] == 0 else (0, 1)


def cross_entropy_calls(x, make) -> Calls:
    """Class indices (with weights, an ignored target, label smoothing) and probabilities as targets."""
    rows = _rows(x)
    if rows is None:
        return []
    c = rows.shape[1]
    target = _classes(rows, make)
    probabilities = make(rows.shape, position=3, specials=False).to(torch.float64).softmax(-1).to(x.dtype)
    return [
        ((rows, target), {"reduction": 1}),
        ((rows, target), {"weight": _weights(c, make), "reduction": 2, "label_smoothing": 0.1}),
        ((rows, target), {"reduction": 0, "label_smoothing": 0.25}),
        ((rows, probabilities), {"reduction": 1}),
        ((rows, probabilities), {"reduction": 0, "label_smoothing": 0.1}),
    ]


def _target(x, make) -> torch.Tensor:
    return make(x.shape, position=1, specials=False)


def regression_calls(*extras: dict[str, Any]) -> Callable:
    """(x, target) losses: every reduction, each with the extra keyword sets (beta, delta) in turn."""
    keywords = extras or ({},)

    def calls(x, make) -> Calls:
        target = _target(x, make)
        return [
            ((x, target), {"reduction": reduction, **keywords[k % len(keywords)]})
            for k, reduction in enumerate(REDUCTIONS)
        ]

    return calls


def regression_backward_calls(*extras: Any) -> Callable:
    """(grad, x, target, reduction, *extras): the backward ops take their extras by position."""

    def calls(x, make) -> Calls:
        target = _target(x, make)
        found = []
        for reduction in REDUCTIONS:
            grad = make(x.shape if reduction == 0 else (), position=4, specials=False)
            found.append(((grad, x, target, reduction, *extras), {}))
        return found

    return calls


def _probabilities(x, make, position: int) -> torch.Tensor:
    return make(x.shape, position=position, specials=False, domain=(0.01, 0.99))


def bce_calls(x, make) -> Calls:
    """Probabilities in (0, 1) as input (eager rejects others), with and without weights; targets 0, 1 and
    between (soft labels)."""
    p = _probabilities(x, make, 3)
    target = _probabilities(x, make, 1).round(decimals=1)
    weight = make(x.shape[-1:], position=2, specials=False, domain=(0.1, 2.0))
    calls = [((p, target), {"reduction": r}) for r in REDUCTIONS]
    return [*calls, ((p, target), {"weight": weight, "reduction": 1})]


def bce_backward_calls(x, make) -> Calls:
    found = []
    for (p, target), kwargs in bce_calls(x, make):
        grad = make(p.shape if kwargs["reduction"] == 0 else (), position=4, specials=False)
        found.append(((grad, p, target, kwargs.get("weight"), kwargs["reduction"]), {}))
    return found


def bce_logits_calls(x, make) -> Calls:
    """Logits x; a per-class pos_weight, a weight, every reduction."""
    target = _probabilities(x, make, 1).round(decimals=1)
    pos_weight = make(x.shape[-1:], position=2, specials=False, domain=(0.5, 3.0))
    weight = make(x.shape[-1:], position=3, specials=False, domain=(0.1, 2.0))
    return [
        ((x, target), {"reduction": 0}),
        ((x, target), {"pos_weight": pos_weight, "reduction": 1}),
        ((x, target), {"weight": weight, "pos_weight": pos_weight, "reduction": 2}),
    ]


def kl_div_calls(x, make) -> Calls:
    """x as log-probabilities over the last dim; targets as probabilities and as log-probabilities."""
    if x.dim() == 0 or x.shape[-1] == 0:
        return []
    log_p = torch.log_softmax(x.to(torch.float64).nan_to_num(0, 0, 0), -1).to(x.dtype)
    q = make(x.shape, position=1, specials=False).to(torch.float64).softmax(-1)
    return [
        ((log_p, q.to(x.dtype)), {"reduction": 1}),
        ((log_p, q.to(x.dtype)), {"reduction": 0}),
        ((log_p, q.log().to(x.dtype)), {"reduction": 2, "log_target": True}),
    ]


def signed_target(x, make, position: int = 1) -> torch.Tensor:
    """Targets of -1 and 1."""
    return make(x.shape, position=position, specials=False, domain=(0, 1)).round() * 2 - 1


def soft_margin_calls(x, make) -> Calls:
    return [((x, signed_target(x, make)), {"reduction": r}) for r in REDUCTIONS]


def soft_margin_backward_calls(x, make) -> Calls:
    found = []
    for reduction in REDUCTIONS:
        grad = make(x.shape if reduction == 0 else (), position=4, specials=False)
        found.append(((grad, x, signed_target(x, make), reduction), {}))
    return found


def margin_ranking_calls(x, make) -> Calls:
    other = _target(x, make)
    return [
        ((x, other, signed_target(x, make, 2)), {"margin": m, "reduction": r})
        for m, r in ((0.0, 1), (0.5, 0))
    ]


def hinge_calls(x, make) -> Calls:
    return [((x, signed_target(x, make)), {"margin": m, "reduction": r}) for m, r in ((1.0, 1), (0.5, 2))]


def cosine_embedding_calls(x, make) -> Calls:
    rows = _rows(x)
    if rows is None:
        return []
    other = make(rows.shape, position=1, specials=False)
    target = make(rows.shape[:1], position=2, specials=False, domain=(0, 1)).round() * 2 - 1
    return [((rows, other, target), {"margin": m, "reduction": r}) for m, r in ((0.0, 1), (0.25, 0))]


def poisson_calls(x, make) -> Calls:
    """log_input with the Stirling term (`full`), and rates as input (kept positive)."""
    counts = make(x.shape, position=1, specials=False, domain=(0, 9)).round()
    rates = make(x.shape, position=2, specials=False, domain=(0.01, 5.0))
    return [((x, counts, True, True, 1e-8, 1), {}), ((rates, counts, False, False, 1e-8, 2), {})]


def multi_margin_calls(x, make) -> Calls:
    rows = _rows(x)
    if rows is None:
        return []
    target = _classes(rows, make).clamp(min=0)
    c = rows.shape[1]
    # Over no rows eager's mean and sum are whatever its output's memory held (0, then 6.9e-310 in one
    # process: never written); without a reduction the empty result is an answer.
    return [
        ((rows, target), {"reduction": 1 if rows.shape[0] else 0}),
        ((rows, target), {"p": 2, "weight": _weights(c, make), "reduction": 0}),
    ]


def triplet_calls(x, make) -> Calls:
    rows = _rows(x)
    if rows is None:
        return []
    positive, negative = (
        make(rows.shape, position=1, specials=False),
        make(rows.shape, position=2, specials=False),
    )
    return [
        ((rows, positive, negative), {"margin": 1.0, "reduction": 1}),
        ((rows, positive, negative), {"swap": True, "reduction": 0}),
    ]


def cosine_similarity_calls(x, make) -> Calls:
    if x.dim() == 0:
        return []
    other = make(x.shape, position=1, specials=False)
    return [((x, other), {"dim": -1}), ((x, other[:1]), {"dim": 0, "eps": 1e-4})]


def log_sigmoid_calls(x, make) -> Calls:
    return [((x,), {})]


def loss_specs() -> list[OpSpec]:
    classes = {"not_differentiated": ("target", "weight")}  # autograd has no formula for them
    return [
        _loss("nll_loss.default", nll_keyword_calls, **classes),
        _loss("nll_loss_nd.default", nll_keyword_calls, **classes),
        _loss("nll_loss_forward.default", nll_calls, **classes),
        _loss("nll_loss_backward.default", nll_backward_calls, differentiable=False),
        _loss("nll_loss2d_forward.default", nll2d_calls, results=nll2d_results, **classes),
        _loss("cross_entropy_loss.default", cross_entropy_calls, **classes),
        _loss("mse_loss.default", regression_calls()),
        _loss("mse_loss_backward.default", regression_backward_calls(), differentiable=False),
        _loss("l1_loss.default", regression_calls()),
        _loss("smooth_l1_loss.default", regression_calls({"beta": 1.0}, {"beta": 0.5}, {"beta": 0.0})),
        _loss("smooth_l1_loss_backward.default", regression_backward_calls(0.5), differentiable=False),
        _loss("huber_loss.default", regression_calls({"delta": 1.0}, {"delta": 0.5}, {"delta": 2.0})),
        _loss("huber_loss_backward.default", regression_backward_calls(0.5), differentiable=False),
        _loss("binary_cross_entropy.default", bce_calls, **classes),
        _loss("binary_cross_entropy_backward.default", bce_backward_calls, differentiable=False),
        _loss(
            "binary_cross_entropy_with_logits.default",
            bce_logits_calls,
            not_differentiated=("target", "weight", "pos_weight"),
        ),
        _loss("kl_div.default", kl_div_calls),
        _loss("soft_margin_loss.default", soft_margin_calls, not_differentiated=("target",)),
        _loss("soft_margin_loss_backward.default", soft_margin_backward_calls, differentiable=False),
        _loss("margin_ranking_loss.default", margin_ranking_calls),
        _loss("hinge_embedding_loss.default", hinge_calls),
        _loss("cosine_embedding_loss.default", cosine_embedding_calls),
        _loss("poisson_nll_loss.default", poisson_calls),
        _loss("multi_margin_loss.default", multi_margin_calls, **classes),
        _loss("triplet_margin_loss.default", triplet_calls),
        _loss("cosine_similarity.default", cosine_similarity_calls),
        _loss("log_sigmoid_forward.default", log_sigmoid_calls, results=_loss_only),
    ]
