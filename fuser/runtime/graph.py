"""The callable a compiled graph becomes: it runs the graph's steps in order over a list of values (env,
one slot per node), freeing each value after its last reader."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from fuser.lower.shapes import SizeBinder
from fuser.runtime.eager_step import materialize
from fuser.runtime.horizontal_step import HorizontalStep


class CompiledGraph:
    """The callable AOTAutograd gets back: boxed arguments in, a list of outputs out."""

    _boxed_call = True

    def __init__(
        self,
        graph_module: fx.GraphModule,
        steps: list,
        slots: dict[fx.Node, int],
        frees: list[list[int]],
        binder: SizeBinder,
    ):
        self.graph_module = graph_module
        self.steps = steps
        self.slots = slots
        self.frees = frees
        self.binder = binder
        graph = graph_module.graph
        self.placeholders = [slots[n] for n in graph.nodes if n.op == "placeholder"]
        self.leading = self.placeholders == list(range(len(self.placeholders)))
        self.attributes = [
            (slots[n], _fetch_attr(graph_module, n.target)) for n in graph.nodes if n.op == "get_attr"
        ]
        (output,) = [n for n in graph.nodes if n.op == "output"]
        self.output_spec = output.args[0]
        # The usual graph returns a flat sequence of nodes: its outputs are read slot by slot.
        flat = isinstance(self.output_spec, (list, tuple))
        flat = flat and all(isinstance(value, fx.Node) for value in self.output_spec)
        self.output_slots = [slots[node] for node in self.output_spec] if flat else None

    def __call__(self, args: list) -> Any:
        key = self.binder.key(args)
        if self.leading:  # the usual graph: the inputs hold the first slots (an optimizer's: a thousand)
            env = list(args)
            env.extend([None] * (len(self.slots) - len(env)))
        else:
            env = [None] * len(self.slots)
            for slot, value in zip(self.placeholders, args, strict=True):
                env[slot] = value
        args.clear()  # the boxed calling convention: let inputs be freed as soon as possible
        for slot, value in self.attributes:
            env[slot] = value
        for step, frees in zip(self.steps, self.frees, strict=True):
            step(env, key)
            for slot in frees:
                env[slot] = None
        if self.output_slots is not None:
            return [env[slot] for slot in self.output_slots]
        return list(materialize(self.output_spec, env, self.slots))

    def device_tables(self) -> list[torch.Tensor]:
        """The device tensors its horizontal launches read besides env: what a CUDA graph of this
        graph's launches (`fuser.runtime.cuda_graphs`) must keep alive."""
        return [
            tensor
            for step in self.steps
            if isinstance(step, HorizontalStep)
            for launch in step.launches.values()
            for tensor in (launch.table, launch.programs)
            if tensor is not None
        ]


class CompiledBackwardGraph(CompiledGraph):
    """A backward graph: autograd may run it from inside a function Dynamo is compiling (one that calls
    backward()), where Dynamo would try to trace the runtime itself. Forward graphs are called from
    Dynamo's own compiled code and skip this guard, which costs several microseconds a call."""

    @torch.compiler.disable
    def __call__(self, args: list) -> Any:
        return super().__call__(args)


def _fetch_attr(module: torch.nn.Module, target: str) -> Any:
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value
