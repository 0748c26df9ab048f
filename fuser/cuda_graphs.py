"""CUDA graphs for compiled graphs of static shape: their launches replayed as one.

A compiled call's host work (its Python runtime, one launch per kernel) can cost more than its kernels: a
compiled AdamW step over 200 parameters took 0.62 ms on an H200 where its two kernels take 0.44 ms
(docs/gpu-runs.md, 2026-11-26). Replaying a CUDA graph of those launches costs one launch.

A graph qualifies when replaying it is the same as running it:

- every input is a CUDA tensor of static sizes (a CPU scalar or a Python number would be baked into the
  graph at its capture value);
- it has no random op (a replay would not draw new numbers the way eager does);
- in the default mode, `"inputs"`, every output is one of its inputs (a compiled `optimizer.step()`);
  in mode `"any"` (`options={"cuda_graphs": True}` or FUSER_CUDA_GRAPHS=1) outputs may be new tensors.

At run time a qualifying graph is captured at a call whose inputs have the same addresses (and, for a
backward graph, whose strides Dynamo does not guard, the same strides) as the call before: its kernels are
compiled and its horizontal tables built by then. A capture is replayed while its inputs keep those
addresses; any other call runs the graph as usual.

A new output of a capture lives in memory the capture owns (its private pool), which every replay writes
again. So a capture returns aliases of those tensors and is replayed only once the caller holds none of
what it returned last time (counted on the storage: an alias, a view, a tensor autograd saved). A loop
that keeps the last result while it computes the next (`out = f(x)`) alternates between two captures;
where every capture's outputs are still held, the call runs as usual, into fresh memory. An output that
is a view of an input (not the input itself) would keep the caller's tensor alive in the capture: such a
graph is not replayed. A capture that fails (an eager op that synchronizes, a table that would have to
change during the capture) is logged and not tried again; at most `MAX_CAPTURES` are made per graph.
Off on the CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from fuser import metrics

log = logging.getLogger("fuser")

MAX_CAPTURES = 3
MODES = ("inputs", "any")


def unqualified_reason(graph: fx.Graph, mode: str = "inputs") -> str | None:
    """Why replaying a CUDA graph of this graph would not be the same as running it; None if it would."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in placeholders:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or value.device.type != "cuda":
            return f"input {node.name} is not a CUDA tensor ({type(value).__name__})"
        if not all(isinstance(s, int) for s in (*value.shape, *value.stride())):
            return f"input {node.name} has symbolic sizes"
    if mode == "inputs":
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


def _use_count(tensor: torch.Tensor) -> int:
    return torch._C._storage_Use_Count(tensor.untyped_storage()._cdata)


@dataclass
class _Capture:
    graph: Any  # torch.cuda.CUDAGraph
    key: list  # the inputs' addresses (and strides) it was captured at
    # What a replay returns, per output: an input's position (int), a tensor the capture owns, or a
    # value that is neither (None for a gradient nothing asked for).
    outputs: list
    owned: list[tuple[torch.Tensor, int]] = field(default_factory=list)  # and their storages' idle counts
    held: list = field(default_factory=list)  # device tables its launches read: kept alive with it
    counts: dict[str, int] = field(default_factory=dict)  # counters one call bumps

    def free(self) -> bool:
        """Whether the caller holds nothing this capture returned (a replay would overwrite it)."""
        return all(_use_count(tensor) == idle for tensor, idle in self.owned)


class ReplayedGraph:
    """Wraps a compiled graph's call: runs it as usual, or replays a CUDA graph of it (module docstring)."""

    _boxed_call = True

    def __init__(self, run: Callable[[list], Any], keep_alive: Callable[[], list], name: str, strides=False):
        self.run = run  # the compiled graph's own call (boxed: it clears its argument list)
        self.keep_alive = keep_alive  # device tensors its launches read besides the inputs (tables)
        self.name = name
        self.strides = strides  # whether the key holds the inputs' strides (no guard checked them)
        self.previous: list | None = None  # the last call's key
        self.captures: list[_Capture] = []
        self.disabled = False

    def _key(self, args: list) -> list:
        if self.strides:
            return [(t.data_ptr(), t.stride()) for t in args]
        return list(map(torch.Tensor.data_ptr, args))

    def __call__(self, args: list) -> Any:
        key = self._key(args)
        held = False
        for capture in self.captures:
            if capture.key == key:
                if capture.free():
                    return self._replay(capture, args)
                held = True
        if not self.disabled and len(self.captures) < MAX_CAPTURES and (key == self.previous or held):
            captured = self._capture(args, key)
            if captured is not None:
                return self._replay(captured, args)
        self.previous = key
        return self.run(args)

    def _capture(self, args: list, key: list) -> _Capture | None:
        before = metrics.counters()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                outputs = self.run(list(args))
        except Exception as error:  # any failure: this graph is run as usual from now on
            return self._disable(f"{type(error).__name__}: {error}")
        after = metrics.counters()
        counts = {name: after[name] - before[name] for name in after if after[name] != before[name]}
        for name, amount in counts.items():  # the capture launched nothing; each replay counts
            metrics.bump(name, -amount)
        capture = _Capture(graph, key, [], held=self.keep_alive(), counts=counts)
        inputs = {t.untyped_storage().data_ptr() for t in args}
        for output in outputs:
            if not isinstance(output, torch.Tensor):
                capture.outputs.append(output)
            elif any(output is arg for arg in args):
                capture.outputs.append(next(i for i, arg in enumerate(args) if output is arg))
            elif output.untyped_storage().data_ptr() in inputs:
                # The capture ran nothing: this call runs as usual, and so does every later one.
                return self._disable(f"an output is a view of an input ({tuple(output.shape)})")
            else:
                capture.outputs.append(output)
        del outputs
        capture.owned = [(t, _use_count(t)) for t in capture.outputs if isinstance(t, torch.Tensor)]
        self.captures.append(capture)
        return capture

    def _disable(self, reason: str) -> None:
        log.info("fuser: %s is not replayed as a CUDA graph: %s", self.name, reason)
        self.disabled = True

    def _replay(self, capture: _Capture, args: list) -> list:
        outputs = [
            args[o] if isinstance(o, int) else o.detach() if isinstance(o, torch.Tensor) else o
            for o in capture.outputs
        ]
        args.clear()
        capture.graph.replay()
        self._count(capture)
        return outputs

    def _count(self, capture: _Capture) -> None:
        # A replay launches what the captured call launched: the counters say so (the perf gate counts
        # kernels per call from them), and graph_replays says how they ran.
        for name, amount in capture.counts.items():
            metrics.bump(name, amount)
        metrics.bump("graph_replays")


class ReplayedBackwardGraph(ReplayedGraph):
    """A backward graph's replay: autograd may call it from inside a function Dynamo is compiling."""

    @torch.compiler.disable
    def __call__(self, args: list) -> Any:
        return super().__call__(args)
