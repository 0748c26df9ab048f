"""CUDA graphs for compiled graphs that only write into their inputs (a compiled `optimizer.step()`).

Such a graph's host work per call (its Python runtime, the launches) can cost more than its kernels: a
compiled AdamW step over 200 parameters took 0.62 ms on an H200 where its two kernels take 0.44 ms
(docs/gpu-runs.md, 2026-11-26). Replaying a CUDA graph of those launches costs one launch.

A graph qualifies when replaying it is the same as running it:

- every input is a CUDA tensor (a CPU scalar or a Python number would be baked into the graph at its
  capture value), and every output is one of its inputs: nothing the graph allocates escapes it, so no
  caller can hold memory that a later replay overwrites;
- it has no random op (a replay would not draw new numbers the way eager does).

At run time a qualifying graph is captured at a call whose inputs have the same addresses as the call
before (the kernels are compiled and the horizontal tables built by then), and replayed while every
input keeps its address; any other call runs the graph as usual. A capture that fails (an eager op that
synchronizes, a table that would have to change during the capture) is logged and not tried again; at
most `MAX_CAPTURES` are made per graph (inputs that keep moving, e.g. new gradients every step in a
different place, get the ordinary path). On by default for CUDA graphs that get horizontal fusion (what
the recorded GPU runs validated together); `options={"cuda_graphs": True/False}` or FUSER_CUDA_GRAPHS=1/0
sets it. Off on the CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from fuser import metrics

log = logging.getLogger("fuser")

MAX_CAPTURES = 3


def unqualified_reason(graph: fx.Graph) -> str | None:
    """Why replaying a CUDA graph of this graph would not be the same as running it; None if it would."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in placeholders:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or value.device.type != "cuda":
            return f"input {node.name} is not a CUDA tensor ({type(value).__name__})"
    (output,) = [n for n in graph.nodes if n.op == "output"]
    for value in output.args[0]:
        if not isinstance(value, fx.Node) or value.op != "placeholder":
            return f"output {value} is not one of the inputs"
    for node in graph.nodes:
        if node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(
            node.target, "tags", ()
        ):
            return f"{node.target} is random"
    return None


def output_positions(graph: fx.Graph) -> list[int]:
    """A qualifying graph's outputs, as positions among its inputs."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    (output,) = [n for n in graph.nodes if n.op == "output"]
    return [placeholders.index(node) for node in output.args[0]]


class ReplayedGraph:
    """Wraps a compiled graph's call: runs it as usual, or replays its CUDA graph (module docstring)."""

    _boxed_call = True

    def __init__(
        self, run: Callable[[list], Any], keep_alive: Callable[[], list], outputs: list[int], name: str
    ):
        self.run = run  # the compiled graph's own call (boxed: it clears its argument list)
        self.keep_alive = keep_alive  # device tensors its launches read besides the inputs (tables)
        self.outputs = outputs  # its outputs, as positions among its inputs (`output_positions`)
        self.name = name
        self.previous: list[int] | None = None  # the last call's input addresses
        self.addresses: list[int] | None = None  # the captured graph's
        self.graph: torch.cuda.CUDAGraph | None = None
        self.held: list = []  # what the captured graph reads that nothing else may keep alive
        self.counts: dict[str, int] = {}  # counters one call bumps, bumped again at each replay
        self.captures = 0
        self.disabled = False

    def __call__(self, args: list) -> Any:
        addresses = list(map(torch.Tensor.data_ptr, args))
        if self.graph is not None and addresses == self.addresses:
            outputs = [args[i] for i in self.outputs]
            args.clear()
            self.graph.replay()
            self._count()
            return outputs
        if not self.disabled and addresses == self.previous and self.captures < MAX_CAPTURES:
            captured = self._capture(args, addresses)
            if captured is not None:
                return captured
        self.previous = addresses
        return self.run(args)

    def _capture(self, args: list, addresses: list[int]) -> list | None:
        self.captures += 1
        before = metrics.counters()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.run(list(args))
        except Exception as error:  # any failure: this graph is run as usual from now on
            log.info(
                "fuser: %s is not replayed as a CUDA graph: %s: %s", self.name, type(error).__name__, error
            )
            self.disabled = True
            return None
        after = metrics.counters()
        self.graph, self.addresses, self.held = graph, addresses, self.keep_alive()
        self.counts = {name: after[name] - before[name] for name in after if after[name] != before[name]}
        for name, amount in self.counts.items():  # the capture launched nothing; the replay below counts
            metrics.bump(name, -amount)
        outputs = [args[i] for i in self.outputs]
        args.clear()
        graph.replay()  # the capture ran nothing: this call's work
        self._count()
        return outputs

    def _count(self) -> None:
        # A replay launches what the captured call launched: the counters say so (the perf gate counts
        # kernels per call from them), and graph_replays says how they ran.
        for name, amount in self.counts.items():
            metrics.bump(name, amount)
        metrics.bump("graph_replays")
