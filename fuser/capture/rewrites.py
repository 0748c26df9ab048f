"""Calls in Dynamo's graph replaced, before AOTAutograd, by torch code that computes what eager computes.

For an op whose PyTorch decomposition is registered at the Autograd key (`py_impl(DispatchKey.Autograd)`),
AOTAutograd's tracing runs that decomposition before any decomposition table is consulted, so neither
`decomposition_table` nor leaving the op to eager whole changes what the fuser gets. Where the stock
decomposition computes differently from eager, the call is swapped here, in the graph Dynamo hands over.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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


REWRITES = {
    F.multi_margin_loss: _functional_multi_margin_loss,
    torch._C._nn.multi_margin_loss: _multi_margin_loss,
    aten.multi_margin_loss: _multi_margin_loss,
    aten.multi_margin_loss.default: _multi_margin_loss,
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
