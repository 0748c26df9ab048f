"""Compile one aten graph, as a list of passes (`compile_graph`):

capture (testing rewrites, bool arg-reductions read as uint8) -> partition and generate
(`fuser.emit.generation`) -> horizontal grouping (`fuser.plan.horizontal`) -> in-place folding (`fuser.plan.inplace`)
-> the steps that run it, each kernel with its eager fallback -> the graph's callable, replayed as a
CUDA graph where that is safe.
"""

from __future__ import annotations

import logging
import operator
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import fx

from fuser import metrics, observe
from fuser.emit.codegen import KernelSource
from fuser.emit.generation import Generated, kernel_symbols, plan_and_generate
from fuser.lower.nodes import downstream
from fuser.lower.shapes import SizeBinder
from fuser.options import Options
from fuser.plan import horizontal, inplace
from fuser.plan.partition import Kernel, Plan
from fuser.runtime import compile_pool, cuda_graphs
from fuser.runtime.eager_step import EagerStep
from fuser.runtime.graph import CompiledBackwardGraph, CompiledGraph
from fuser.runtime.horizontal_step import HorizontalStep
from fuser.runtime.kernel_step import KernelStep
from fuser.testing import miscompiles

log = logging.getLogger("fuser")


@dataclass
class GraphReport:
    """What the fuser did with one graph (see `fuser.explain`)."""

    kernels: list[KernelSource]
    eager_calls: list[str]  # aten calls left eager, by op
    fallbacks: list[tuple[str, str]]  # (op, reason) for nodes the fuser could not lower


# Set by `fuser.explain` to collect a report for every graph compiled while it runs.
reports: ContextVar[list[GraphReport] | None] = ContextVar("fuser_reports", default=None)


def _is_counted(node: fx.Node) -> bool:
    """Views, tuple lookups and size arithmetic launch nothing, so they are not counted as extern calls."""
    if node.target is operator.getitem or getattr(node.target, "is_view", False):
        return False
    return isinstance(node.meta.get("val"), torch.Tensor | tuple | list)


def _names(kernel: Kernel) -> list[str]:
    return [n.name for n in kernel.members]


class EagerKernel:
    """A kernel's nodes run one by one with aten: the fallback when the kernel cannot run. Members the
    kernel would have stored into graph inputs (`into`) are copied into them after every node ran."""

    def __init__(self, kernel: Kernel, slots: dict[fx.Node, int], into: dict[fx.Node, fx.Node] | None = None):
        self.calls = [EagerStep(node, slots, counted=True) for node in kernel.computed]
        self.copies = [(slots[member], slots[target]) for member, target in (into or {}).items()
                       if member in kernel.members]  # fmt: skip

    def __call__(self, env: list, key: tuple[int, ...] = ()) -> None:
        for call in self.calls:
            call(env)
        for member, target in self.copies:
            env[target].copy_(env[member])
            env[member] = env[target]


def _frees(
    steps: list, reads: list[list[fx.Node]], keep: set[fx.Node], slots: dict[fx.Node, int]
) -> list[list[int]]:
    """For each step, the env slots no later step reads: released right after it."""
    last_read = {}
    for position, nodes in enumerate(reads):
        for node in nodes:
            last_read[node] = position
    frees = [[] for _ in steps]
    for node, position in last_read.items():
        if node not in keep:
            frees[position].append(slots[node])
    return frees


ARG_REDUCTIONS = (torch.ops.aten.argmax.default, torch.ops.aten.argmin.default)


def _bool_arg_reductions_as_uint8(graph: fx.Graph) -> None:
    """argmax/argmin over a bool tensor read it as uint8 (the same first index of the extreme). Traced
    programs make them (torch's cumprod backward: argmax of x == 0), and eager has no bool kernel: left
    eager, as an op not validated for bool is, the program raised."""
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in ARG_REDUCTIONS:
            continue
        source = node.args[0]
        value = source.meta.get("val") if isinstance(source, fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.dtype != torch.bool:
            continue
        with graph.inserting_before(node):
            cast = graph.call_function(torch.ops.prims.convert_element_type.default, (source, torch.uint8))
        cast.meta["val"] = value.to(torch.uint8)
        node.replace_input_with(source, cast)


def capture(graph_module: fx.GraphModule, backward: bool) -> fx.Graph:
    """The graph the passes work on: a testing-only rewrite where one is planted, and bool inputs of
    argmax/argmin read as uint8."""
    graph = miscompiles.rewrite("graph", graph_module.graph, backward=backward)
    _bool_arg_reductions_as_uint8(graph)
    return graph


@dataclass
class Steps:
    """What runs a plan: the steps in order, the nodes each reads, the sources it launches, and each
    node's slot in the env the steps share."""

    slots: dict[fx.Node, int]
    steps: list
    reads: list[list[fx.Node]]
    sources: list[KernelSource]


def build_steps(
    plan: Plan, generated: Generated, graph: fx.Graph, options: Options, binder: SizeBinder, into: dict
) -> Steps:
    """One step per plan step: an eager call, a kernel (with its eager fallback), or a horizontal group."""
    slots = {node: i for i, node in enumerate(graph.nodes)}
    # What eager steps make, and what is computed from it: a kernel that fell back for a size it was not
    # planned for hands its real size on, so the kernels after it check theirs too.
    eager_made = downstream(graph, {step for step in plan.steps if isinstance(step, fx.Node)}.__contains__)
    built = Steps(slots, [], [], [])

    def kernel_step(kernel: Kernel, variants: list[KernelSource]) -> KernelStep:
        fallback = EagerKernel(kernel, slots, into)
        return KernelStep(variants, kernel, slots, fallback, options.strict, binder.symbols, into, eager_made)

    def add(step, reads: list[fx.Node]) -> None:
        built.steps.append(step)
        built.reads.append(reads)

    for step in plan.steps:
        if isinstance(step, fx.Node):
            add(EagerStep(step, slots, counted=_is_counted(step)), step.all_input_nodes)
        elif isinstance(step, horizontal.Horizontal):
            parts = [kernel_step(part, generated.variants(part)) for part in step.parts]
            add(HorizontalStep(step.source, parts, options.strict), step.leaves + _stored_into(step, into))
            built.sources.append(step.source)
        elif (variants := generated.variants(step)) is not None:
            launched = kernel_step(step, variants)
            built.sources.append(launched.source_for(tuple(binder.hints)))
            add(launched, step.leaves + _stored_into(step, into))
        else:
            _why_eager(step, generated, options, binder)
            add(EagerKernel(step, slots, into), [n for c in step.computed for n in c.all_input_nodes])
    return built


def _stored_into(step: Kernel | horizontal.Horizontal, into: dict) -> list[fx.Node]:
    return [into[m] for m in step.members if m in into]


def _why_eager(kernel: Kernel, generated: Generated, options: Options, binder: SizeBinder) -> None:
    """Log (or, strict, raise) why a kernel runs eagerly: it was never generated, or generating it failed."""
    error = generated.error(kernel)
    if error is None:  # not generated: its sizes use symbols no graph input binds
        unbound = sorted(map(str, kernel_symbols(kernel) - set(binder.symbols)))
        log.info("%s run eager: their sizes use %s, which no graph input binds", _names(kernel), unbound)
    else:
        if options.strict:
            raise error
        log.warning(
            "codegen failed for %s (%s: %s); they run eagerly", _names(kernel), type(error).__name__, error
        )
    metrics.bump("fallbacks")


# A backward graph is compiled lazily, at the first backward(), which may run inside a function Dynamo
# is compiling: Dynamo must not trace the compiler itself.
@torch.compiler.disable
def compile_graph(
    graph_module: fx.GraphModule, example_inputs: list, options: Options, backward: bool = False
) -> CompiledGraph:
    metrics.bump("graphs_compiled")
    # observe: what a measuring tool times; miscompiles: testing only, a planted kind read once a compile
    with observe.compile_step(), miscompiles.compiling():
        return _compile(graph_module, example_inputs, options, backward)


def _compile(
    graph_module: fx.GraphModule, example_inputs: list, options: Options, backward: bool
) -> CompiledGraph:
    graph = capture(graph_module, backward)
    binder = SizeBinder(graph)
    plan, generated = plan_and_generate(graph, options, set(binder.symbols))
    if options.fuse and options.horizontal:
        plan = horizontal.batch(plan, generated)
    plan, into = inplace.fold(plan, generated)
    for node, reason in plan.fallbacks:
        log.info("%s runs eager: %s", node.target, reason)
        metrics.bump("fallbacks")
    built = build_steps(plan, generated, graph, options, binder, into)
    _report(plan, built.sources)
    # The first call's launches find their kernels compiled side by side, not one after another.
    compile_pool.ahead(built.steps, tuple(binder.hints))
    return _callable(graph_module, graph, built, binder, options, example_inputs, backward)


def _report(plan: Plan, sources: list[KernelSource]) -> None:
    collected = reports.get()
    if collected is not None:
        eager = [str(s.target) for s in plan.steps if isinstance(s, fx.Node) and _is_counted(s)]
        collected.append(GraphReport(sources, eager, [(str(n.target), r) for n, r in plan.fallbacks]))


def _callable(graph_module, graph, built: Steps, binder, options, example_inputs, backward) -> CompiledGraph:
    """The graph's callable: it frees each value after its last reader, and replays as a CUDA graph where
    that is asked for and safe."""
    slots, steps = built.slots, built.steps
    (output,) = [n for n in graph.nodes if n.op == "output"]
    frees = _frees(steps, built.reads, set(output.all_input_nodes), slots)
    kind = CompiledBackwardGraph if backward else CompiledGraph
    compiled = kind(graph_module, steps, slots, frees, binder, options.call_function)
    # A graph that launches nothing (views and getitems only: Dynamo's resume functions often are) has
    # nothing to replay.
    launches = any(not isinstance(s, EagerStep) or s.counted for s in steps)
    mode = options.cuda_graph_mode(example_inputs)
    if launches and mode is not None:
        reason = cuda_graphs.unqualified_reason(graph, mode)
        if reason is None:
            replayed = cuda_graphs.ReplayedBackwardGraph if backward else cuda_graphs.ReplayedGraph
            # A backward graph's inputs (saved tensors, gradients) are not guarded by Dynamo: its key
            # holds their strides, which its launches were captured with.
            name = f"{'backward' if backward else 'forward'} graph of {len(steps)} step(s)"
            written = cuda_graphs.written_inputs(graph)
            return replayed(compiled, compiled.device_tables, name, strides=backward, written=written)
        log.debug("not replayed as a CUDA graph: %s", reason)
    return compiled
