"""Find the first node of a failing program whose result a backend gets wrong.

A model that fails says only that some gradient is off. This captures the program's Dynamo graph, and
for a node k makes the graph that ends at k: its value, and the gradients of `sum(value * w)` (a fixed
random weight `w`) with respect to every graph input that requires one. That graph runs three ways —
through the backend, eagerly, and eagerly in float64 — and node k *disagrees* when the backend's value
or a gradient is further from float64 than eager's, by the verdict's budget. Bisection over the nodes in
program order finds a disagreeing node whose predecessor agrees, in about log2(nodes) compiles.

The answer is one line: the node, its target, the tensor that disagrees (the value, or the gradient of
which input) and the source line that made it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx

from conformance.harness.policy import Budget


@dataclass
class Captured:
    graph: torch.fx.GraphModule
    inputs: list


def capture(fn: Callable[[], torch.Tensor]) -> list[Captured]:
    """Every graph Dynamo makes of `fn()`, in the order they run, with their example inputs."""
    graphs: list[Captured] = []

    def record(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(Captured(gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=record)()
    torch._dynamo.reset()
    return graphs


def _ending_at(gm: torch.fx.GraphModule, node_name: str) -> torch.fx.GraphModule:
    # A copy of the graph whose only output is that node's value; what it does not need is dropped.
    graph = copy.deepcopy(gm.graph)
    target = next(n for n in graph.nodes if n.name == node_name)
    output = next(n for n in graph.nodes if n.op == "output")
    graph.erase_node(output)
    graph.output(target)
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(gm, graph)


def _tensor_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    nodes = []
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        computed = node.op in ("call_function", "call_method", "call_module")
        if computed and isinstance(value, torch.Tensor) and value.is_floating_point():
            nodes.append(node)
    return nodes


def _run(gm, inputs: list, weight_seed: int, backend) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    inputs = [
        x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
        for x in inputs
    ]
    fn = torch.compile(gm, backend=backend) if backend is not None else gm
    value = fn(*inputs)
    grads: list[torch.Tensor | None] = [None] * len(inputs)
    wanted = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.requires_grad]
    if wanted and value.requires_grad:
        generator = torch.Generator().manual_seed(weight_seed)
        weight = torch.randn(value.shape, generator=generator, dtype=torch.float64).to(
            value.device, value.dtype
        )
        found = torch.autograd.grad((value * weight).sum(), [inputs[i] for i in wanted], allow_unused=True)
        for i, g in zip(wanted, found, strict=True):
            grads[i] = g
    return value.detach(), grads


def _error(x: torch.Tensor | None, reference: torch.Tensor | None) -> float:
    if x is None or reference is None or not reference.numel():
        return 0.0
    error = torch.nan_to_num((x.double() - reference.double()).abs(), nan=float("inf")).max().item()
    scale = reference.abs().max().item()
    return error / scale if scale else error


def _as_float64(inputs: list) -> list:
    return [
        x.detach().double().requires_grad_(x.requires_grad)
        if isinstance(x, torch.Tensor) and x.is_floating_point()
        else x
        for x in inputs
    ]


def disagreement(gm, inputs: list, backend, budget: Budget) -> str | None:
    """Which tensor of this graph's value and input gradients the backend gets wrong, or None."""
    torch._dynamo.reset()
    got = _run(gm, inputs, 0, backend)
    eager = _run(gm, inputs, 0, None)
    exact = _run(gm, _as_float64(inputs), 0, None)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    names = ["value"] + [f"gradient of input {name}" for name in placeholders]
    tensors = zip(names, [got[0], *got[1]], [eager[0], *eager[1]], [exact[0], *exact[1]], strict=True)
    for name, g, e, x in tensors:
        if g is None and x is not None:
            return f"{name}: missing"
        backend_error, eager_error = _error(g, x), _error(e, x)
        if backend_error > budget.factor * eager_error + budget.floor:
            return f"{name}: error {backend_error:.2e} against eager's {eager_error:.2e}"
    return None


def first_disagreeing_node(fn: Callable[[], torch.Tensor], backend, budget: Budget) -> str:
    """One line naming the first node (by bisection) of `fn`'s graphs that `backend` gets wrong."""
    for index, captured in enumerate(capture(fn)):
        nodes = _tensor_nodes(captured.graph)
        if not nodes:
            continue
        last = disagreement(_ending_at(captured.graph, nodes[-1].name), captured.inputs, backend, budget)
        if last is None:
            continue
        good, bad, why = -1, len(nodes) - 1, last
        while bad - good > 1:
            middle = (good + bad) // 2
            found = disagreement(
                _ending_at(captured.graph, nodes[middle].name), captured.inputs, backend, budget
            )
            if found is None:
                good = middle
            else:
                bad, why = middle, found
        node = nodes[bad]
        target = getattr(node.target, "__name__", str(node.target))
        return f"graph {index}, node {node.name} ({target}){_source_line(node)}: {why}"
    return (
        "no node of the program's graphs disagrees when checked alone (the failure needs the whole program)"
    )


def _source_line(node: torch.fx.Node) -> str:
    # ' at file.py:47 `code`' from the innermost frame of the node's stack trace, when it has one.
    lines = (node.meta.get("stack_trace") or "").splitlines()
    frames = [i for i, line in enumerate(lines) if line.strip().startswith('File "')]
    if not frames or frames[-1] + 1 >= len(lines):
        return ""
    frame = lines[frames[-1]].strip()
    path, line = frame.split('"')[1], frame.split("line ")[-1].split(",")[0]
    return f" at {path.rsplit('/', 1)[-1]}:{line} `{lines[frames[-1] + 1].strip()}`"
