"""Partition an aten graph into Triton kernels and eager calls.

The model (Inductor's, simplified): every lowerable pointwise or view node is a function of an index
that a kernel may inline. A node is *materialized* (stored to memory by some kernel) only when
something that cannot inline it needs it: an eager call, or the graph's output. Materialized nodes of
one shape share a kernel unless that would create a cycle through an eager call. Views of graph inputs,
of eager results or of materialized values stay eager aliases: they cost nothing and copy nothing.

A reduction is inlined too, but only into a row kernel of its own space (`fuser.lower.reductions.Space`):
the kernel that computes values of the reduction's input shape, or one value per row. So a softmax,
a layer norm or add + layer norm is one kernel: its reductions are computed in the kernel and its
full-shape result is the stored member. A reduction whose consumer lives in another space is
materialized and loaded from memory.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import fx

from fuser.lower.dtypes import SUPPORTED_DTYPES
from fuser.lower.nodes import (
    bind_arguments,
    downstream,
    eager_check_arguments,
    host_read_values,
    meta,
    operand_dtypes,
    tensor_meta,
)
from fuser.lower.ops import (
    EAGER_CHECKS,
    INDEXED_BY_OVERLOAD,
    POINTWISE_BY_OVERLOAD,
    SCATTER_BY_OVERLOAD,
    VIEW_BY_OVERLOAD,
    Accepts,
)
from fuser.lower.reductions import REDUCTION_BY_OVERLOAD, Space, is_reduction, space_of
from fuser.lower.shapes import same_shape
from fuser.lower.views import MAX_POSITIONS
from fuser.plan.row_reads import reads_at_other_rows

log = logging.getLogger("fuser")

Gate = Callable[[fx.Node], str | None]


@dataclass
class Kernel:
    """One Triton kernel: it stores `members` and computes them from `leaves` (values it loads)."""

    members: list[fx.Node]
    shape: tuple[int, ...]
    device: torch.device
    space: Space | None = None  # set for a row kernel (one holding reductions)
    computed: list[fx.Node] = field(default_factory=list)  # members and inlined nodes, topological order
    leaves: list[fx.Node] = field(default_factory=list)  # loaded values, in graph order
    # A kernel reducing this one's rows (its columns' sums), computed with it: this kernel sums its own
    # rows by groups while it reads them, and that one adds the groups' sums (`attach_column_sums`). Its
    # members, computed nodes and leaves are among this kernel's, after its own members.
    column_sums: Kernel | None = None

    @property
    def row_members(self) -> list[fx.Node]:
        """The members this kernel stores while it walks its rows (all, without column sums)."""
        return (
            self.members[: len(self.members) - len(self.column_sums.members)]
            if self.column_sums
            else self.members
        )


@dataclass
class Plan:
    steps: list[Kernel | fx.Node]  # execution order; an fx.Node runs eagerly
    fallbacks: list[tuple[fx.Node, str]]  # aten calls left eager, with the reason


def _tensor_args(node: fx.Node) -> list[torch.Tensor]:
    return [m for m in (tensor_meta(a) for a in node.all_input_nodes) if m is not None]


def lowering_obstacle(node: fx.Node) -> str | None:
    """Why `node` cannot go in a kernel, or None if it can."""
    target = node.target
    if (
        target not in POINTWISE_BY_OVERLOAD
        and target not in VIEW_BY_OVERLOAD
        and target not in SCATTER_BY_OVERLOAD
        and target not in REDUCTION_BY_OVERLOAD
        and target not in INDEXED_BY_OVERLOAD
    ):
        return "no lowering in the op table"
    out = meta(node)
    if not isinstance(out, torch.Tensor):
        return "its result is not a tensor"
    for value in (out, *_tensor_args(node)):
        if value.dtype not in SUPPORTED_DTYPES:
            return f"dtype {value.dtype} is not lowered"
        if value.layout != torch.strided:
            return f"layout {value.layout} is not lowered"
        if value.is_quantized:
            return "quantized tensors are not lowered"
        if value.device != out.device:
            return f"it mixes devices ({value.device} and {out.device})"
    if out.device.type not in ("cpu", "cuda"):
        return f"device {out.device.type} is not lowered"
    if target in INDEXED_BY_OVERLOAD:
        return _indexed_obstacle(node)
    if target in VIEW_BY_OVERLOAD:
        return _select_out_of_range(node)
    op = POINTWISE_BY_OVERLOAD.get(target)
    if op is not None:
        bound = bind_arguments(node)
        if any(_symbolic_number(bound[name]) for name, _ in op.operands):
            return SYMBOLIC_NUMBER
        operand_types = [d for d in operand_dtypes(op, bound, out.dtype) if d is not None]
        if op.accepts is Accepts.FLOATING and not all(map(op.accepts.admits, operand_types)):
            return f"{op.name} is lowered for floating dtypes only"
        if op.accepts is Accepts.INTEGRAL and not all(map(op.accepts.admits, operand_types)):
            return f"{op.name} is lowered for integer and bool dtypes only"
        # Bool operands compute as int32 (operand_types): read the operands' own dtypes here.
        if op.accepts is Accepts.NUMBERS and not any(op.accepts.admits(v.dtype) for v in _tensor_args(node)):
            return f"{op.name} is not lowered for bool operands"
        if op.name in EAGER_CHECKS:
            return EAGER_CHECKS[op.name](eager_check_arguments(bound), out.dtype)
    return None


# A Python number the graph takes as an input (a label smoothing that changed between calls, so Dynamo made
# it a SymFloat) and an op computes with: a kernel has no parameter for one. (Symbolic sizes of a view are
# kernel parameters already.)
SYMBOLIC_NUMBER = "it computes with a symbolic number, not a tensor"


def _symbolic_number(arg: object) -> bool:
    return isinstance(arg, fx.Node) and tensor_meta(arg) is None


def _select_out_of_range(node: fx.Node) -> str | None:
    """A select whose index is outside its dim, which eager rejects (IndexError). torch 2.11's fake select
    does not check, so such a graph is traced, and a kernel would read out of bounds (on CUDA, an illegal
    memory access; found by the eager-rejects check on an H100). Left eager, the call raises as eager does."""
    if VIEW_BY_OVERLOAD[node.target].name != "select":
        return None
    args = bind_arguments(node)
    size, index = meta(args["self"]).shape[args["dim"]], args["index"]
    if isinstance(size, int) and isinstance(index, int) and not -size <= index < size:
        return f"its index {index} is out of range for a dim of size {size}: eager raises"
    return None


def _indexed_obstacle(node: fx.Node) -> str | None:
    """What keeps a gather or a scatter of a value (`fuser.lower.ops.IndexedOp`) out of a kernel."""
    args = bind_arguments(node)
    if _symbolic_number(args.get("value")):
        return SYMBOLIC_NUMBER
    source, positions = meta(args["self"]), meta(args["index"])
    if source.dim() == 0 or positions.dim() != source.dim():
        return "it indexes a 0-d tensor, or its index has another rank than its input"
    if args.get("sparse_grad"):
        return "its sparse_grad is set"
    if INDEXED_BY_OVERLOAD[node.target].name == "scatter_value":
        count = positions.shape[args["dim"] % source.dim()]
        if not isinstance(count, int) or count > MAX_POSITIONS:
            return f"it writes more than {MAX_POSITIONS} positions (or a symbolic number) along its dim"
    return None


def _is_view(node: fx.Node) -> bool:
    return node.target in VIEW_BY_OVERLOAD


def sized_by_data(graph: fx.Graph) -> frozenset[fx.Node]:
    """The nodes computed from a result whose size depends on the data (`_unique`, `nonzero`: ops tagged
    `dynamic_output_shape`). Their recorded sizes are not to be trusted: torch 2.11 traced a CUDA
    backward's `_unique` with one element where it returned three at run time, and a kernel planned
    for one row summed one row (index_fill's value gradient, issue 16)."""
    return downstream(
        graph,
        lambda node: (
            isinstance(node.target, torch._ops.OpOverload)
            and torch.Tag.dynamic_output_shape in node.target.tags
        ),
    )


def _fusible_nodes(graph: fx.Graph, fallbacks: list, gate: Gate | None) -> set[fx.Node]:
    fusible = set()
    data_sized = sized_by_data(graph)
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        reason = lowering_obstacle(node)
        if reason is None and node in data_sized:
            reason = "its sizes come from an op whose result's size depends on the data (run eagerly)"
        if reason is None and gate is not None:
            reason = gate(node)
        if reason is None:
            fusible.add(node)
        elif isinstance(node.target, torch._ops.OpOverload):
            fallbacks.append((node, reason))
    return fusible


def _users_outside(node: fx.Node, fusible: set[fx.Node]) -> bool:
    return any(user not in fusible for user in node.users)


def _settle_views(graph: fx.Graph, fusible: set[fx.Node]) -> set[fx.Node]:
    """Drop alias-only views from `fusible` and return the materialized nodes."""
    while True:
        materialized = {n for n in fusible if _users_outside(n, fusible)}
        aliases = {
            n
            for n in fusible
            if _is_view(n) and (n.all_input_nodes[0] not in fusible or n.all_input_nodes[0] in materialized)
        }
        if not aliases:
            return materialized
        fusible -= aliases


def _cone(node: fx.Node, members: set[fx.Node], fusible: set, materialized: set) -> tuple[set, set]:
    """The nodes a kernel holding `members` computes to produce `node`, and the leaves it loads."""
    inner, leaves, stack = set(), set(), [node]
    while stack:
        for source in stack.pop().all_input_nodes:
            inlined = source in fusible and (source not in materialized or source in members)
            if inlined and source not in inner:
                inner.add(source)
                stack.append(source)
            elif not inlined:
                leaves.add(source)
    return inner, leaves


def _reaches(starts: set[fx.Node], targets: set[fx.Node], reads: dict[fx.Node, set[fx.Node]]) -> bool:
    """Whether any of `starts` depends, through any path, on one of `targets`.

    A kernel runs as a whole: a member of a kernel (a key of `reads`) depends on everything its kernel
    loads, not only on its own inputs."""
    seen, stack = set(), list(starts)
    while stack:
        node = stack.pop()
        if node in targets:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(reads.get(node, node.all_input_nodes))
    return False


def _settle_reductions(graph: fx.Graph, fusible: set, materialized: set) -> None:
    """Materialize every reduction that a consumer in another space would otherwise inline.

    A materialized node's kernel works in one space: that of the first reduction in its cone whose
    space can compute the node's shape. Reductions of any other space in the cone are materialized
    (stored by their own kernel and loaded). Repeats until nothing changes.
    """
    order = {node: i for i, node in enumerate(graph.nodes)}
    changed = True
    while changed:
        changed = False
        for node in sorted(materialized, key=order.__getitem__):
            inner, _ = _cone(node, set(), fusible, materialized)
            space = space_of(node) if is_reduction(node) else None
            for reduction in sorted((n for n in inner if is_reduction(n)), key=order.__getitem__):
                candidate = space_of(reduction)
                if space is None and candidate.accepts(meta(node).shape):
                    space = candidate
                elif not candidate.same_as(space):
                    materialized.add(reduction)
                    changed = True
            if changed:
                break


def _is_gather(node: fx.Node) -> bool:
    indexed = INDEXED_BY_OVERLOAD.get(node.target)
    return indexed is not None and indexed.name == "gather"


def _settle_gathers(graph: fx.Graph, fusible: set, materialized: set) -> None:
    """Materialize a gather that reads a row of another space's reduction, one value a row (cross-entropy's
    `gather(x - max - log(sum), 1, target)`), where its consumer lives in another space: the row kernel
    that reduces the rows then gathers too, each program at its own rows. Inlined into the consumer (the
    loss's mean over the rows, one program), every gathered element was a scattered load from that one
    program: 10.5 us of cross-entropy's forward on the H200 (records/gpu-h200-2026-12-03-s28.md)."""
    order = {node: i for i, node in enumerate(graph.nodes)}
    changed = True
    while changed:
        changed = False
        for node in sorted(materialized, key=order.__getitem__):
            inner, _ = _cone(node, set(), fusible, materialized)
            here = space_of(node) if is_reduction(node) else None
            for reduction in sorted((n for n in inner if is_reduction(n)), key=order.__getitem__):
                if here is None and space_of(reduction).accepts(meta(node).shape):
                    here = space_of(reduction)
            for gather in (n for n in inner if _is_gather(n)):
                reads, leaves = _cone(gather, set(), fusible, materialized)
                shape = meta(gather).shape
                for reduction in (n for n in reads | leaves if n in fusible and is_reduction(n)):
                    space = space_of(reduction)
                    row_value = space.accepts(shape) and not same_shape(shape, space.shape)
                    if row_value and not space.same_as(here):
                        materialized.add(gather)
                        changed = True
                        break
            if changed:
                break


def _space_of_member(node: fx.Node, fusible: set, materialized: set) -> Space | None:
    if is_reduction(node):
        return space_of(node)
    inner, _ = _cone(node, set(), fusible, materialized)
    return next((space_of(n) for n in inner if is_reduction(n)), None)


def _fits(kernel: Kernel, space: Space | None, shape) -> bool:
    """Whether a node of `shape` (whose cone reduces in `space`, if any) can join `kernel`."""
    if kernel.space is not None and space is not None:
        return kernel.space.same_as(space)
    if kernel.space is not None:
        return kernel.space.accepts(shape)
    if space is not None:
        return all(space.accepts(meta(m).shape) for m in kernel.members)
    return same_shape(kernel.shape, shape)


def _group(graph: fx.Graph, fusible: set, materialized: set, share: bool, stored: frozenset) -> list[Kernel]:
    """Kernels of the materialized nodes, in graph order; with `share`, a node joins the first kernel
    it fits that it does not depend on. A member in `stored` is loaded, never inlined, by the others."""
    kernels: list[Kernel] = []
    reads: dict[fx.Node, set[fx.Node]] = {}  # each member -> what its kernel loads so far (shared)
    for node in graph.nodes:
        if node not in materialized:
            continue
        value = meta(node)
        space = _space_of_member(node, fusible, materialized)
        for kernel in kernels if share else ():
            if kernel.device != value.device or not _fits(kernel, space, value.shape):
                continue
            _, leaves = _cone(node, set(kernel.members) - stored, fusible, materialized)
            if not _reaches(leaves, set(kernel.members), reads):
                kernel.members.append(node)
                loads = reads[kernel.members[0]]
                loads |= leaves
                reads[node] = loads
                if space is not None and kernel.space is None:
                    kernel.space, kernel.shape = space, space.shape
                break
        else:
            shape = space.shape if space is not None else tuple(value.shape)
            kernels.append(Kernel([node], shape, value.device, space))
            reads[node] = _cone(node, set(), fusible, materialized)[1]
    order = {node: i for i, node in enumerate(graph.nodes)}
    for kernel in kernels:
        members = set(kernel.members)
        computed, leaves = set(members), set()
        for member in kernel.members:
            inner, member_leaves = _cone(member, members - stored, fusible, materialized)
            computed |= inner
            leaves |= member_leaves
        kernel.computed = sorted(computed, key=order.__getitem__)
        kernel.leaves = sorted(leaves, key=order.__getitem__)
    return kernels


def _schedule(graph: fx.Graph, kernels: list[Kernel], fusible: set) -> list[Kernel | fx.Node]:
    """Order kernels and eager calls so each runs after what it reads (Kahn's algorithm, graph order)."""
    order = {node: i for i, node in enumerate(graph.nodes)}
    step_of: dict[fx.Node, Kernel | fx.Node] = {}
    for kernel in kernels:
        for member in kernel.members:
            step_of[member] = kernel
    eager = [n for n in graph.nodes if n.op == "call_function" and n not in fusible]
    for node in eager:
        step_of[node] = node
    reads = {id(k): k.leaves for k in kernels} | {id(n): n.all_input_nodes for n in eager}
    steps = [*kernels, *eager]
    depends = {id(s): {id(step_of[r]) for r in reads[id(s)] if r in step_of} for s in steps}
    waiting_on = {key: len(deps) for key, deps in depends.items()}
    dependents: dict[int, list] = {id(s): [] for s in steps}
    for step in steps:
        for dep in depends[id(step)]:
            dependents[dep].append(step)

    def key(step) -> int:
        return order[step.members[0]] if isinstance(step, Kernel) else order[step]

    ready = [(key(s), id(s), s) for s in steps if waiting_on[id(s)] == 0]
    heapq.heapify(ready)
    scheduled = []
    while ready:
        _, _, step = heapq.heappop(ready)
        scheduled.append(step)
        for dependent in dependents[id(step)]:
            waiting_on[id(dependent)] -= 1
            if waiting_on[id(dependent)] == 0:
                heapq.heappush(ready, (key(dependent), id(dependent), dependent))
    if len(scheduled) != len(steps):
        raise RuntimeError("fuser: the partition has a cycle; this is a bug in fuser.plan.partition")
    return scheduled


# The longest row a kernel computing column sums holds: its rows must fit one block, on a GPU
# (fuser.runtime.launch_config.GPU_PERSISTENT_MAX) and in the interpreter alike.
COLUMN_SUMS_MAX_COLS = 8192


def _sums_columns_of(rows: Kernel, columns: Kernel) -> bool:
    """Whether `columns` only sums, over the rows of `rows`'s space, values `rows` can compute per element:
    a layer norm's weight and bias gradients beside its input gradient."""
    from fuser.emit.row_codegen import contiguous_rows, splittable  # codegen's view of a kernel

    x, y = rows.space, columns.space
    if x is None or y is None or rows.column_sums is not None or rows.device != columns.device:
        return False
    if not same_shape(x.shape, y.shape) or set(y.reduced) != set(x.kept) or not x.kept or not x.reduced:
        return False
    cols = 1
    for d in x.reduced:
        cols *= x.shape[d]
    if not isinstance(cols, int) or cols > COLUMN_SUMS_MAX_COLS or not contiguous_rows(rows):
        return False
    reductions = [n for n in columns.computed if is_reduction(n)]
    if not all(REDUCTION_BY_OVERLOAD[r.target].name == "sum" and space_of(r).same_as(y) for r in reductions):
        return False
    return splittable(columns) and not set(columns.leaves) & set(rows.members)


def attach_column_sums(graph: fx.Graph, kernels: list[Kernel]) -> list[Kernel]:
    """Compute each column-sum kernel with a row kernel that reads the same rows, where neither depends on
    the other: the layer norm backward's weight and bias gradients read the gradient and the input a second
    time otherwise (issue 29). The row kernel then sums its rows in groups (`fuser.emit.row_codegen`), and the
    column kernel adds the groups' sums."""
    reads = {m: set(k.leaves) for k in kernels for m in k.members}
    taken: set[int] = set()
    for columns in kernels:
        for rows in kernels:
            if rows is columns or id(rows) in taken or id(columns) in taken:
                continue
            if not _sums_columns_of(rows, columns) or not set(columns.leaves) & set(rows.leaves):
                continue  # not column sums of these rows, or nothing read twice: nothing to save
            if _reaches(set(columns.leaves), set(rows.members), reads) or _reaches(
                set(rows.leaves), set(columns.members), reads
            ):
                continue
            rows.column_sums = columns
            taken |= {id(rows), id(columns)}
            break
    order = {node: i for i, node in enumerate(graph.nodes)}
    for kernel in kernels:
        if kernel.column_sums is not None:
            extra = kernel.column_sums
            kernel.members = [*kernel.members, *extra.members]
            kernel.computed = sorted({*kernel.computed, *extra.computed}, key=order.__getitem__)
            kernel.leaves = sorted({*kernel.leaves, *extra.leaves}, key=order.__getitem__)
    attached = {id(k.column_sums) for k in kernels if k.column_sums is not None}
    return [k for k in kernels if id(k) not in attached]


def partition(graph: fx.Graph, fuse: bool = True, gate: Gate | None = None) -> Plan:
    """Split `graph` into kernels and eager calls; `fuse=False` gives every lowered op its own kernel.
    `gate` may keep a lowerable node eager, saying why (the validation manifest:
    `fuser.validate.validation.node_obstacle`). A reduction that a row kernel would read at another row than its
    own (through a slice or a flip, `fuser.plan.row_reads`) is stored by its own kernel, and the graph split
    again, until no kernel reads one so. A 0-d value its reader's step checks on the host before launch
    (`fuser.lower.nodes.host_read_values`) is stored by another kernel, so that it is in memory by then.
    Column sums are then computed with the row kernels they read (`attach_column_sums`)."""
    stored = {value for node in graph.nodes for value, _ in host_read_values(node)}
    while True:
        kernels, fusible, fallbacks = _partition(graph, fuse, frozenset(stored), gate)
        moved = {
            reduction
            for kernel in kernels
            if kernel.space is not None
            for reduction in reads_at_other_rows(kernel)
        }
        if moved <= stored:
            break
        stored |= moved
    if fuse:
        kernels = attach_column_sums(graph, kernels)
    return Plan(_schedule(graph, kernels, fusible), fallbacks)


def _partition(
    graph: fx.Graph, fuse: bool, stored: frozenset[fx.Node], gate: Gate | None
) -> tuple[list[Kernel], set[fx.Node], list[tuple[fx.Node, str]]]:
    """One split of `graph` into kernels (unscheduled), with the fusible nodes and the fallbacks; nodes
    in `stored` end their kernel: it stores them, and their consumers load them."""
    fallbacks: list[tuple[fx.Node, str]] = []
    fusible = _fusible_nodes(graph, fallbacks, gate)
    if not fuse:
        fusible = {n for n in fusible if not _is_view(n)}
    materialized = _settle_views(graph, fusible) if fuse else set(fusible)
    materialized |= stored & fusible
    if fuse:
        _settle_gathers(graph, fusible, materialized)
    _settle_reductions(graph, fusible, materialized)
    return _group(graph, fusible, materialized, share=fuse, stored=stored), fusible, fallbacks
