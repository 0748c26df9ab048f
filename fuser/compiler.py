"""Compile one aten graph: partition it, generate its kernels and build the callable that runs it."""

from __future__ import annotations

import logging
import operator
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import fx

from fuser import cuda_graphs, horizontal, inplace, metrics, miscompiles, validation
from fuser.codegen import KernelSource, PointwiseBuilder, package
from fuser.nodes import downstream
from fuser.options import Options
from fuser.partition import Kernel, Plan, partition
from fuser.row_codegen import ReadAtAnotherRow, RowBuilder, contiguous_rows, splittable, whole_inputs
from fuser.runtime import CompiledBackwardGraph, CompiledGraph, EagerStep, HorizontalStep, KernelStep
from fuser.shapes import SizeBinder, free_symbols

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


def kernel_symbols(kernel: Kernel) -> set:
    """Every size symbol the kernel's shapes and strides mention (they must be bound at launch)."""
    symbols = set()
    for node in (*kernel.computed, *kernel.leaves):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            for size in (*value.shape, *value.stride()):
                symbols |= free_symbols(size)
    return symbols


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


def generate(kernel: Kernel) -> list[KernelSource]:
    """The kernel's variants: one for a pointwise kernel; persistent and looped for a row kernel."""
    if kernel.space is None:
        return [package(PointwiseBuilder(kernel), "pointwise")]
    inner, whole = contiguous_rows(kernel), whole_inputs(kernel)
    variants = [
        package(RowBuilder(kernel, persistent), kind, inner, whole)
        for persistent, kind in ((True, "persistent"), (False, "looped"))
    ]
    if splittable(kernel):
        variants += [
            package(RowBuilder(kernel, False, stage), stage, inner, whole)
            for stage in ("split_partials", "split_combine")
        ]
    return variants


def plan_and_generate(graph: fx.Graph, options: Options, bound: set) -> tuple[Plan, dict[int, object]]:
    """Partition `graph` and generate each kernel whose sizes `bound` symbols cover: by id(kernel), its
    variants or the exception its generation raised. A kernel that reads one of its reductions at
    another row (a slice of a row max, say) cannot hold it: partition again with that reduction stored
    by its own kernel, until every such read goes through memory."""
    stored: set[fx.Node] = set()
    while True:
        gate = None if options.unvalidated == "fuse" else validation.node_obstacle
        plan = partition(graph, fuse=options.fuse, stored=frozenset(stored), gate=gate)
        generated: dict[int, object] = {}
        for step in plan.steps:
            if isinstance(step, Kernel) and kernel_symbols(step) <= bound:
                try:
                    generated[id(step)] = generate(step)
                except ReadAtAnotherRow as error:
                    if error.node not in stored:
                        stored.add(error.node)
                        break
                    generated[id(step)] = error  # stored, yet still read in-kernel: a bug, not a retry
                except Exception as error:
                    generated[id(step)] = error
        else:
            return plan, generated


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


# A backward graph is compiled lazily, at the first backward(), which may run inside a function Dynamo
# is compiling: Dynamo must not trace the compiler itself.
@torch.compiler.disable
def compile_graph(
    graph_module: fx.GraphModule, example_inputs: list, options: Options, backward: bool = False
) -> CompiledGraph:
    metrics.bump("graphs_compiled")
    graph = miscompiles.rewrite("graph", graph_module.graph, backward=backward)  # testing only
    _bool_arg_reductions_as_uint8(graph)
    binder = SizeBinder(graph)
    plan, generated = plan_and_generate(graph, options, set(binder.symbols))
    if options.fuse and options.horizontal:
        plan, generated = horizontal.batch(plan, generated)
    plan, into = inplace.fold(plan, generated)
    for node, reason in plan.fallbacks:
        log.info("%s runs eager: %s", node.target, reason)
        metrics.bump("fallbacks")
    slots = {node: i for i, node in enumerate(graph.nodes)}
    # What eager steps make, and what is computed from it: a kernel that fell back for a size it was not
    # planned for hands its real size on, so the kernels after it check theirs too.
    eager = {step for step in plan.steps if isinstance(step, fx.Node)}
    eager_made = downstream(graph, eager.__contains__)
    steps, reads, sources = [], [], []
    for step in plan.steps:
        if isinstance(step, fx.Node):
            steps.append(EagerStep(step, slots, counted=_is_counted(step)))
            reads.append(step.all_input_nodes)
            continue
        if isinstance(step, horizontal.Horizontal):
            parts = [
                KernelStep(
                    generated[id(p)],
                    p,
                    slots,
                    EagerKernel(p, slots, into),
                    options.strict,
                    binder.symbols,
                    into,
                    eager_made,
                )
                for p in step.parts
            ]
            steps.append(HorizontalStep(step.source, parts, options.strict))
            sources.append(step.source)
            reads.append(step.leaves + [into[m] for m in step.members if m in into])
            continue
        fallback = EagerKernel(step, slots, into)
        if id(step) not in generated:  # not generated: its sizes use symbols no graph input binds
            log.info(
                "%s run eager: their sizes use %s, which no graph input binds",
                _names(step),
                sorted(map(str, kernel_symbols(step) - set(binder.symbols))),
            )
            metrics.bump("fallbacks")
            steps.append(fallback)
            reads.append([n for c in step.computed for n in c.all_input_nodes])
            continue
        variants = generated[id(step)]
        if isinstance(variants, Exception):
            error = variants
            if options.strict:
                raise error
            log.warning(
                "codegen failed for %s (%s: %s); they run eagerly",
                _names(step),
                type(error).__name__,
                error,
            )
            metrics.bump("fallbacks")
            steps.append(fallback)
            reads.append([n for c in step.computed for n in c.all_input_nodes])
            continue
        kernel_step = KernelStep(
            variants, step, slots, fallback, options.strict, binder.symbols, into, eager_made
        )
        sources.append(kernel_step.source_for(tuple(binder.hints)))
        steps.append(kernel_step)
        reads.append(step.leaves + [into[m] for m in step.members if m in into])
    (output,) = [n for n in graph.nodes if n.op == "output"]
    frees = _frees(steps, reads, set(output.all_input_nodes), slots)
    collected = reports.get()
    if collected is not None:
        eager = [str(s.target) for s in plan.steps if isinstance(s, fx.Node) and _is_counted(s)]
        collected.append(GraphReport(sources, eager, [(str(n.target), r) for n, r in plan.fallbacks]))
    if backward:
        return CompiledBackwardGraph(graph_module, steps, slots, frees, binder)
    compiled = CompiledGraph(graph_module, steps, slots, frees, binder)
    # A graph that launches nothing (views and getitems only: Dynamo's resume functions often are) has
    # nothing to replay.
    launches = any(not isinstance(s, EagerStep) or s.counted for s in steps)
    if launches and options.cuda_graphs_for(example_inputs):
        reason = cuda_graphs.unqualified_reason(graph)
        if reason is None:
            positions = cuda_graphs.output_positions(graph)
            return cuda_graphs.ReplayedGraph(
                compiled, compiled.device_tables, positions, f"graph of {len(steps)} step(s)"
            )
        log.debug("not replayed as a CUDA graph: %s", reason)
    return compiled
