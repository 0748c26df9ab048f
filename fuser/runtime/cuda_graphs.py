"""CUDA graphs for compiled graphs of static shape: their launches replayed as one.

A compiled call's host work (its Python runtime, one launch per kernel) can cost more than its kernels: a
compiled AdamW step over 200 parameters took 0.62 ms on an H200 where its two kernels take 0.44 ms
(docs/gpu-runs.md, 2026-11-26). Replaying a CUDA graph of those launches costs one launch.

A graph qualifies when replaying it is the same as running it:

- every input is a CUDA tensor of static sizes (a CPU scalar or a Python number would be baked into the
  graph at its capture value);
- it has no random op (a replay would not draw new numbers the way eager does), and no 0-d value a step
  checks on the host before its launch (`LaunchStep.host_checks`: a replay would skip the check);
- in the default mode, `"inputs"`, every output is one of its inputs (a compiled `optimizer.step()`);
  in mode `"any"` (`options={"cuda_graphs": True}` or FUSER_CUDA_GRAPHS=1) outputs may be new tensors.

At run time a qualifying graph is captured at its second call (its kernels are compiled and its
horizontal tables built by the first). An input that moved since the call before (a new batch, a new
gradient) is copied, at each replay, into a buffer the capture reads; where inputs moved, the capturing
call first runs the graph over those buffers, so what the launches build for new addresses is built
before the capture. An input the graph writes into is never copied (the write would miss the caller's
tensor): if it moves, the call runs as usual. A capture is replayed while every other input keeps its
address (and, for a backward graph, whose inputs no Dynamo guard checks, its strides).

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
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from fuser import metrics
from fuser.lower.nodes import host_read_values

log = logging.getLogger("fuser")

MAX_CAPTURES = 3


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
        if host_read_values(node):  # a replay would skip the step's check of the value
            return f"{node.target} reads a 0-d value eager checks on the host"
    return None


def written_inputs(graph: fx.Graph) -> frozenset[int]:
    """The positions of the inputs the graph writes into (a `copy_` or another op that mutates them)."""
    positions = {node: i for i, node in enumerate(n for n in graph.nodes if n.op == "placeholder")}
    written = set()
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for argument, value in zip(schema.arguments, node.args, strict=False):
            if argument.alias_info is not None and argument.alias_info.is_write and value in positions:
                written.add(positions[value])
    return frozenset(written)


def _use_count(tensor: torch.Tensor) -> int:
    return torch._C._storage_Use_Count(tensor.untyped_storage()._cdata)


@dataclass
class _Capture:
    graph: Any  # torch.cuda.CUDAGraph
    key: list  # the inputs' addresses (and strides) it was captured at
    # Inputs that moved between the two calls before the capture: each call copies them into buffers the
    # capture reads (position -> buffer); every other input must be where it was.
    copied: dict[int, torch.Tensor]
    # What a replay returns, per output: an input's position (int), a tensor the capture owns, or a
    # value that is neither (None for a gradient nothing asked for).
    outputs: list = field(default_factory=list)
    owned: list[tuple[torch.Tensor, int]] = field(default_factory=list)  # and their storages' idle counts
    held: list = field(default_factory=list)  # device tables its launches read: kept alive with it
    counts: dict[str, int] = field(default_factory=dict)  # counters one call bumps

    def __post_init__(self):
        static = [i for i in range(len(self.key)) if i not in self.copied]
        # In C: an optimizer's graph has a thousand inputs, all static.
        self.static_key = operator.itemgetter(*static) if static else (lambda key: ())
        self.static_value = self.static_key(self.key)

    def matches(self, key: list) -> bool:
        return key == self.key if not self.copied else self.static_key(key) == self.static_value

    def free(self) -> bool:
        """Whether the caller holds nothing this capture returned (a replay would overwrite it)."""
        return all(_use_count(tensor) == idle for tensor, idle in self.owned)


class ReplayedGraph:
    """Wraps a compiled graph's call: runs it as usual, or replays a CUDA graph of it (module docstring)."""

    _boxed_call = True

    def __init__(
        self,
        run: Callable[[list], Any],
        keep_alive: Callable[[], list],
        name: str,
        strides: bool = False,
        written: frozenset[int] = frozenset(),
    ):
        self.run = run  # the compiled graph's own call (boxed: it clears its argument list)
        self.keep_alive = keep_alive  # device tensors its launches read besides the inputs (tables)
        self.name = name
        self.strides = strides  # whether the key holds the inputs' strides (no guard checked them)
        self.written = written  # inputs the graph writes: never copied (the write would miss the caller's)
        self.previous: list | None = None  # the last call's key
        self.captures: list[_Capture] = []
        self.disabled = False

    def _key(self, args: list) -> list:
        if self.strides:
            return [(t.data_ptr(), t.stride()) for t in args]
        return list(map(torch.Tensor.data_ptr, args))

    def __call__(self, args: list) -> Any:
        key = self._key(args)
        previous, self.previous = self.previous, key
        held = None
        for capture in self.captures:
            if capture.matches(key):
                if capture.free():
                    return self._replay(capture, args)
                held = capture
        if self.disabled or len(self.captures) >= MAX_CAPTURES or previous is None:
            return self.run(args)
        if held is not None:  # the same inputs, its outputs still held: another capture beside it
            moved = list(held.copied)
        else:
            moved = [i for i, (now, before) in enumerate(zip(key, previous, strict=True)) if now != before]
        if self.written.intersection(moved):
            return self.run(args)  # an input written in place moved: its graph would write elsewhere
        return self._capture(args, key, moved)

    def _capture(self, args: list, key: list, moved: list[int]) -> list:
        """This call's outputs, and a capture of the graph for later calls where one can be made."""
        # A buffer per moved input: its strides where they are dense, else contiguous (`empty_like`'s rule:
        # a copy into an expanded tensor's overlapping memory would raise); the capture's launches read
        # the buffer's own strides, and each replay copies the input into it.
        copied = {i: torch.empty_like(args[i]) for i in moved}
        inputs = [copied.get(i, arg) for i, arg in enumerate(args)]
        warm = None
        if copied:
            # A first run over the buffers: it is this call's work, and what the launches build for new
            # addresses (a horizontal table) is built before the capture, which must not build anything.
            for position, buffer in copied.items():
                buffer.copy_(args[position])
            warm = self.run(list(inputs))
            moved_back = {id(buffer): args[i] for i, buffer in copied.items()}  # the caller's, not ours
            warm = [moved_back.get(id(o), o) for o in warm]
        before = metrics.counters()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                outputs = self.run(list(inputs))
        except Exception as error:  # any failure: this graph is run as usual from now on
            self._disable(f"{type(error).__name__}: {error}")
            return self._done(warm, args)
        after = metrics.counters()
        counts = {name: after[name] - before[name] for name in after if after[name] != before[name]}
        for name, amount in counts.items():  # the capture launched nothing; each replay counts
            metrics.bump(name, -amount)
        capture = _Capture(graph, key, copied, held=self.keep_alive(), counts=counts)
        storages = {t.untyped_storage().data_ptr() for t in inputs}
        position_of = {id(t): i for i, t in enumerate(inputs)}
        for output in outputs:
            if not isinstance(output, torch.Tensor):
                capture.outputs.append(output)
            elif id(output) in position_of:
                capture.outputs.append(position_of[id(output)])
            elif output.untyped_storage().data_ptr() in storages:
                # The capture ran nothing: this call runs as usual, and so does every later one.
                self._disable(f"an output is a view of an input ({tuple(output.shape)})")
                return self._done(warm, args)
            else:
                capture.outputs.append(output)
        del outputs
        capture.owned = [(t, _use_count(t)) for t in capture.outputs if isinstance(t, torch.Tensor)]
        self.captures.append(capture)
        return self._replay(capture, args) if warm is None else self._done(warm, args)

    def _done(self, outputs: list | None, args: list) -> list:
        """`outputs` of a run already made for this call, or (None) this call run as usual."""
        if outputs is None:
            return self.run(args)
        args.clear()
        return outputs

    def _disable(self, reason: str) -> None:
        log.info("fuser: %s is not replayed as a CUDA graph: %s", self.name, reason)
        self.disabled = True

    def _replay(self, capture: _Capture, args: list) -> list:
        for position, buffer in capture.copied.items():
            buffer.copy_(args[position])
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
