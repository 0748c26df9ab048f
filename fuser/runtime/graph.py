"""The callable a compiled graph becomes: it runs the graph's steps in order over a list of values (env,
one slot per node), freeing each value after its last reader."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from fuser import metrics
from fuser.lower.shapes import SizeBinder
from fuser.runtime import call_function
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
        write_call: bool = True,
    ):
        self.graph_module = graph_module
        self.steps = steps
        self.slots = slots
        self.frees = frees
        self.binder = binder
        # From the second call on, the call is one function written out for the first call's binding of
        # the sizes (`fuser.runtime.call_function`), unless `write_call` is off; it is written once.
        self.write_call = write_call
        self.call: Any = None
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
        if self.call is not None:
            return self.call(args)
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
        outputs = self.run_from(0, env, key)
        if self.write_call:  # from the next call on, the call written out for this binding
            self.write_call = False
            self.call = call_function.write(self, key)
        return outputs

    def run_from(self, start: int, env: list, key: tuple[int, ...]) -> list:
        """The general loop: runs the steps from `start` on and returns the outputs."""
        for step, frees in zip(self.steps[start:], self.frees[start:], strict=True):
            step(env, key)
            for slot in frees:
                env[slot] = None
        if self.output_slots is not None:
            return [env[slot] for slot in self.output_slots]
        return list(materialize(self.output_spec, env, self.slots))

    def resume(self, start: int, env: list, key: tuple[int, ...], launched: int) -> list:
        """Where a check of the written-out call fails before step `start`: the loop runs the rest."""
        if launched:
            metrics.bump("kernels_launched", launched)
        return self.run_from(start, env, key)

    def gave_up(self, index: int, env: list, key: tuple[int, ...], error: Exception, launched: int) -> list:
        """Where a launch the written-out call made raised: the step gives up as in the loop, the graph
        drops the call, and the loop runs the rest."""
        self.call = None
        self.steps[index].give_up(env, key, error)
        for slot in self.frees[index]:
            env[slot] = None
        return self.resume(index + 1, env, key, launched)

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
