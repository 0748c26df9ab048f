"""Horizontal fusion: independent pointwise kernels of one shape of computation become one launch.

An optimizer step decomposes (`fuser.capture.foreach`) into the same chain of pointwise ops for every parameter.
Vertical fusion makes that one kernel per parameter (parameters differ in size), plus one kernel that
holds every parameter's step-count update (they all have shape ()). Those kernels generate the *same*
Triton source: sizes and strides are arguments and the source depends only on the op sequence, the
dtypes, the rank and the layout class. This pass batches them.

1. Each pointwise kernel is split into its independent parts: no member is computed in two parts, and
   an inlined intermediate several parts share is recomputed by each (the 200 step updates of one
   shape-() kernel are 200 parts; so are the updates of 100 same-shape parameters that all read one
   learning rate).
2. Parts whose IR is the same (statements, signature and pointer dtypes; nothing is printed), on one
   device, at the same depth of the step graph (the longest path of steps before them) form a group.
   Equal depth makes the groups safe to merge: a step's dependencies all lie at smaller depths, so no
   group can wait on itself.
3. A group of two or more becomes one `Horizontal` step; the parts of a kernel that join no group are
   merged back into one kernel, as the partitioner made it.

The horizontal kernel is the part's kernel with its parameters turned into data: one row per part in
an int64 table (each pointer as an address, each integer as itself, then the part's first program),
and a table mapping each program to its part. A program loads its row, casts each address with
`.to(tl.pointer_type(dtype))` and runs the part's body unchanged. So one compiled kernel serves any
number of parts of any sizes: the table is built at launch (`fuser.runtime.horizontal_step.HorizontalStep`).
Triton's interpreter dereferences such pointers too, so the CPU runs the same kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import fx

from fuser.emit import ir
from fuser.emit.codegen import KernelSource, PointwiseBuilder, package
from fuser.emit.generation import Generated
from fuser.lower.dtypes import triton_name
from fuser.lower.nodes import meta
from fuser.plan.partition import Kernel, Plan

# The table columns after a part's parameters: the first program of the part.
EXTRA_COLUMNS = ("first_program",)


@dataclass
class Horizontal:
    """One launch computing `parts` (pointwise kernels of one source), one table row each."""

    parts: list[Kernel]
    source: KernelSource  # the horizontal kernel
    part_source: KernelSource  # what each part would run alone

    @property
    def leaves(self) -> list[fx.Node]:
        return [leaf for part in self.parts for leaf in part.leaves]

    @property
    def members(self) -> list[fx.Node]:
        return [member for part in self.parts for member in part.members]


def split(kernel: Kernel) -> list[Kernel]:
    """The independent parts of a pointwise kernel: its members grouped so that no member is computed
    in two parts (a member inlined into another member keeps them together). An inlined intermediate
    that several members share (a value of the learning rate, a bias correction) is recomputed by each
    part that needs it: binding them together instead made a kernel of every same-shape parameter's
    update in a compiled AdamW (a hundred parameters' chains in one kernel: minutes of Triton compile)."""
    computed, members = set(kernel.computed), set(kernel.members)
    parent = list(range(len(kernel.members)))
    position_of = {member: position for position, member in enumerate(kernel.members)}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    cones: list[set[fx.Node]] = []
    for position, member in enumerate(kernel.members):
        stack, cone = [member], set()
        while stack:
            node = stack.pop()
            if node in cone:
                continue
            cone.add(node)
            if node in members and node is not member:
                parent[find(position)] = find(position_of[node])
            stack.extend(n for n in node.all_input_nodes if n in computed)
        cones.append(cone)
    groups: dict[int, list[int]] = {}
    for position in range(len(kernel.members)):
        groups.setdefault(find(position), []).append(position)
    if len(groups) == 1:
        return [kernel]
    return [
        _subkernel(
            kernel, [kernel.members[p] for p in positions], set().union(*(cones[p] for p in positions))
        )
        for positions in groups.values()
    ]


def _subkernel(kernel: Kernel, members: list[fx.Node], nodes: set[fx.Node]) -> Kernel:
    computed = [n for n in kernel.computed if n in nodes]
    reads = {source for node in computed for source in node.all_input_nodes if source not in nodes}
    leaves = [n for n in kernel.leaves if n in reads]
    return Kernel(members, kernel.shape, kernel.device, None, computed, leaves)


def _merge(kernel: Kernel, parts: list[Kernel]) -> Kernel:
    """The parts of `kernel` as one kernel again (members in the kernel's order)."""
    members = {m for part in parts for m in part.members}
    nodes = {n for part in parts for n in part.computed}
    return _subkernel(kernel, [m for m in kernel.members if m in members], nodes)


def _depths(steps: list) -> list[int]:
    """Each step's depth: the longest path of steps that must run before it."""
    writer: dict[fx.Node, int] = {}
    depths = []
    for position, step in enumerate(steps):
        reads = step.leaves if isinstance(step, Kernel) else step.all_input_nodes
        depth = max((depths[writer[r]] + 1 for r in reads if r in writer), default=0)
        depths.append(depth)
        for node in step.members if isinstance(step, Kernel) else (step,):
            writer[node] = position
    return depths


def horizontal_source(part: KernelSource, covers: tuple[str, ...] | None = None) -> KernelSource:
    """The horizontal kernel of `part`: the same body, its parameters read from a table row.
    `covers`: the aten nodes of every part it runs (the header names them all), `part`'s by default."""
    covers = part.covers if covers is None else covers
    params = [name for name, _ in part.params]
    columns = len(params) + len(EXTRA_COLUMNS)
    prologue = [
        ir.Assign("program", ir.Expr("tl.program_id(0)"), 0),
        ir.Assign(
            "part",
            ir.over("tl.load(programs_ptr + program)", "programs_ptr", "program"),
            0,
            comment="which part (tensor) this program works on",
        ),
        ir.Assign("row", ir.over(f"table_ptr + part * {columns}", "table_ptr", "part"), 0),
        ir.Assign(
            "pid",
            ir.over(f"program - tl.load(row + {len(params)}).to(tl.int32)", "program", "row"),
            0,
            comment="the program within its part",
        ),
    ]
    for column, (name, arg) in enumerate(part.params):
        if arg.kind in ("tensor", "output"):
            cast = f".to(tl.pointer_type({triton_name(meta(arg.node).dtype)}))"
        else:
            cast = "" if part.int64 else ".to(tl.int32)"
        prologue.append(ir.Assign(name, ir.over(f"tl.load(row + {column}){cast}", "row"), 0))
    # The part's body but its program id, which the prologue computes from the table.
    body = [s for s in part.statements if not (isinstance(s, ir.Assign) and s.target == "pid")]
    name = f"{part.name}_horizontal"
    header = "\n".join(
        [
            f"# {name}: horizontal kernel, one table row per tensor ({columns} columns: "
            f"{', '.join(params + list(EXTRA_COLUMNS))})",
            "# covers:",
            *(f"#   {line}" for line in covers),
        ]
    )
    return KernelSource(
        name=name,
        params=(),
        covers=covers,
        flat_inputs=(),
        header=header,
        signature=("table_ptr", "programs_ptr", "BLOCK: tl.constexpr"),
        statements=(*prologue, *body),
        kind="horizontal",
    )


def _key(source: KernelSource | None) -> tuple | None:
    """What parts of one group share, or None if the part is not a candidate (not a generated pointwise
    kernel): its statements (int64 indexing shows in them) and signature, and the dtype of each pointer (statements compare by what they
    read and compute, not by the dtypes Triton specializes its arguments on; a horizontal kernel casts its
    addresses to them). Nothing is printed to compare them."""
    if source is None:
        return None
    pointers = tuple(meta(a.node).dtype for _, a in source.params if a.kind in ("tensor", "output"))
    return source.statements, source.signature, pointers


def _pointwise(kernel: Kernel) -> list[KernelSource]:
    return [package(PointwiseBuilder(kernel), "pointwise")]


def batch(plan: Plan, generated: Generated) -> Plan:
    """`plan` with its horizontally fusible kernels grouped into `Horizontal` steps; `generated` gains the
    variants of every kernel the plan now holds."""
    depths = _depths(plan.steps)
    candidates: dict[tuple, list[tuple[Kernel, Kernel]]] = {}  # key -> [(part, its kernel)]
    parts_of: dict[int, list[Kernel]] = {}
    for step, depth in zip(plan.steps, depths, strict=True):
        if not isinstance(step, Kernel) or step.space is not None or _key(generated.pointwise(step)) is None:
            continue
        parts = split(step)
        parts_of[id(step)] = parts
        for part in parts:
            if part is not step:
                generated.add(part, _pointwise)  # if it raises, the part stays with its kernel
            key = _key(generated.pointwise(part))
            if key is not None:
                candidates.setdefault((*key, str(step.device), depth), []).append((part, step))
    grouped: dict[int, Horizontal] = {}  # id(part) -> its group
    for members in candidates.values():
        if len(members) > 1:
            parts = [part for part, _ in members]
            part_source = generated.pointwise(parts[0])
            covers = tuple(line for part in parts for line in generated.pointwise(part).covers)
            group = Horizontal(parts, horizontal_source(part_source, covers), part_source)
            for part in parts:
                grouped[id(part)] = group
    steps: list = []
    placed: set[int] = set()
    for step in plan.steps:
        parts = parts_of.get(id(step))
        if parts is None or not any(id(p) in grouped for p in parts):
            steps.append(step)
            continue
        for part in parts:
            group = grouped.get(id(part))
            if group is not None and id(group) not in placed:
                placed.add(id(group))
                steps.append(group)
        alone = [p for p in parts if id(p) not in grouped]
        if alone:
            rest = _merge(step, alone) if len(alone) > 1 else alone[0]
            if rest is not alone[0]:
                generated.add(rest, _pointwise)
            steps.append(rest)
    return Plan(_schedule(steps), plan.fallbacks)


def _schedule(steps: list) -> list:
    """A topological order of `steps` (a group runs where its first part stood; it may run later if a
    part waits on a step placed after that)."""
    writer: dict[fx.Node, int] = {}
    for position, step in enumerate(steps):
        for node in step.members if isinstance(step, Kernel | Horizontal) else (step,):
            writer[node] = position
    reads = [step.leaves if isinstance(step, Kernel | Horizontal) else step.all_input_nodes for step in steps]
    done: set[int] = set()
    order: list = []
    waiting = list(range(len(steps)))
    while waiting:
        for position in waiting:
            if all(writer[r] in done for r in reads[position] if r in writer and writer[r] != position):
                done.add(position)
                order.append(steps[position])
                waiting.remove(position)
                break
        else:
            raise RuntimeError(
                "fuser: horizontal fusion made a cycle; this is a bug in fuser.plan.horizontal"
            )
    return order
