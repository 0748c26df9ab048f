"""Testing-only torch.compile backends with one planted mistake, for quality tests of the suite.

`wrong_silu_backward`: AOTAutograd with eager kernels, except that every `silu_backward` in the backward
graph returns 1.5 times its value — the forward is right, some gradients are not.

`max_of_nothing`: AOTAutograd with eager kernels, except that the whole-tensor `max` takes -inf as its
identity, so an empty tensor gives -inf where eager raises (a fused reduction without eager's check).

`hangs`: never returns from compiling (a case time limit must stop it).

`i0_zero_at_inf`: AOTAutograd with eager kernels, except that `i0` gives 0 at ±inf, where the suite's spec
leaves i0 unspecified (eager's CPU kernel gives inf there, its CUDA kernel nan): the suite must skip those
positions in results and in the inputs an in-place op writes, and nowhere else.
"""

from __future__ import annotations

import torch
from torch._dynamo.backends.common import aot_autograd

aten = torch.ops.aten


def _eager(gm: torch.fx.GraphModule, example_inputs):
    return gm.forward


def _scaled_silu_backward(gm: torch.fx.GraphModule, example_inputs):
    for node in list(gm.graph.nodes):
        if node.target is aten.silu_backward.default:
            with gm.graph.inserting_after(node):
                scaled = gm.graph.call_function(aten.mul.Tensor, (node, 1.5))
            node.replace_all_uses_with(scaled, delete_user_cb=lambda user, scaled=scaled: user is not scaled)
    gm.recompile()
    return gm.forward


wrong_silu_backward = aot_autograd(fw_compiler=_eager, bw_compiler=_scaled_silu_backward)


def _i0_zero_at_inf(gm: torch.fx.GraphModule, example_inputs):
    for node in list(gm.graph.nodes):
        if node.target is aten.i0.default:
            with gm.graph.inserting_after(node):
                infinite = gm.graph.call_function(aten.isinf.default, (node.args[0],))
            with gm.graph.inserting_after(infinite):
                zero = gm.graph.call_function(aten.where.ScalarSelf, (infinite, 0.0, node))
            node.replace_all_uses_with(zero, delete_user_cb=lambda user, zero=zero: user is not zero)
    gm.recompile()
    return gm.forward


i0_zero_at_inf = aot_autograd(fw_compiler=_i0_zero_at_inf, bw_compiler=_eager)


def _max_with_identity(gm: torch.fx.GraphModule, example_inputs):
    for node in list(gm.graph.nodes):
        if node.target is aten.max.default:
            with gm.graph.inserting_after(node):
                flat = gm.graph.call_function(aten.reshape.default, (node.args[0], [-1]))
            with gm.graph.inserting_after(flat):
                padded = gm.graph.call_function(aten.constant_pad_nd.default, (flat, [0, 1], float("-inf")))
            with gm.graph.inserting_after(padded):
                largest = gm.graph.call_function(aten.amax.default, (padded, [0]))
            node.replace_all_uses_with(largest)
            gm.graph.erase_node(node)
    gm.recompile()
    return gm.forward


max_of_nothing = aot_autograd(fw_compiler=_max_with_identity, bw_compiler=_eager)


def hangs(gm: torch.fx.GraphModule, example_inputs):
    while True:  # a compiler that never finishes (in Python, as tracing a huge graph does)
        pass
