"""Mutations written in place: a kernel stores a graph input's new value straight into the input.

An optimizer step mutates its parameters and state. AOTAutograd (with `keep_inference_input_mutations`)
ends such a graph with one `copy_(input, new_value)` per mutated input; left alone, each is an eager
call after the kernel that stored `new_value` to a fresh tensor — an extra read and write of every
parameter and state tensor, and one launch each. `fold` removes a `copy_` and makes the kernel that
stores `new_value` store it into the input instead, where that is provably the same:

- the copy is plain: same dtype, shape and strides (the kernel stores with the output's strides), a
  graph input as its target, no users, the only copy into that input, and `new_value` not a graph
  output (it would come back aliasing the input) nor copied anywhere else;
- the kernel is pointwise (it writes element i from element i of its inputs) and nothing reads the
  input's old value later: every reader of the input (through views too) runs in an earlier step, or
  is in the writing kernel itself, reading the input directly at the element it writes (codegen loads
  every value before it stores any). A horizontal kernel's other parts count as later readers: its
  programs run in any order.
- and the kernel's code agrees: each load of the input, read from its statements (`fuser.emit.ir.accesses`),
  is at the element the store of the new value writes. The graph rule above decides; this checks that
  code generation did what the rule assumes, so a disagreement keeps the copy eager.

Inputs that alias each other reach the graph as one synthetic base and its views (AOTAutograd): a view
read in the writing kernel fails the rule above, so such a copy stays an eager `copy_`.
"""

from __future__ import annotations

import torch
from torch import fx

from fuser.emit import ir
from fuser.emit.codegen import KernelSource, output_strides
from fuser.emit.generation import Generated
from fuser.lower.nodes import meta
from fuser.lower.ops import VIEW_BY_OVERLOAD
from fuser.lower.shapes import same_shape
from fuser.plan.horizontal import Horizontal
from fuser.plan.partition import Kernel, Plan

aten = torch.ops.aten


def _is_view(node: fx.Node) -> bool:
    return node.target in VIEW_BY_OVERLOAD or getattr(node.target, "is_view", False)


def _readers(node: fx.Node) -> list[fx.Node]:
    """Every node that reads `node`'s data: its users, and the users of its views, transitively."""
    found, stack = [], list(node.users)
    while stack:
        user = stack.pop()
        found.append(user)
        if _is_view(user):
            stack.extend(user.users)
    return found


def _reaches_output(node: fx.Node) -> bool:
    return any(user.op == "output" for user in [node, *_readers(node)])


def _units(steps: list) -> dict[fx.Node, tuple[int, Kernel | None]]:
    """Each node's step position, and the kernel (or horizontal part) computing it; None if eager."""
    units = {}
    for position, step in enumerate(steps):
        if isinstance(step, fx.Node):
            units[step] = (position, None)
        for kernel in (
            step.parts if isinstance(step, Horizontal) else [step] if isinstance(step, Kernel) else []
        ):
            for node in kernel.computed:
                units[node] = (position, kernel)
    return units


def _obstacle(copy: fx.Node, units: dict, generated: Generated) -> str | None:
    """Why `copy` cannot be folded into the kernel storing its source, or None if it can."""
    target, source = copy.args[0], copy.args[1]
    if copy.kwargs.get("non_blocking") or len(copy.args) > 2 or copy.users:
        return "not a plain copy"
    if target.op != "placeholder" or not isinstance(source, fx.Node):
        return "its target is not a graph input"
    if sum(1 for user in target.users if user.target is aten.copy_.default) > 1:
        return "its target is copied into twice"
    if sum(1 for user in source.users if user.target is aten.copy_.default) > 1 or _reaches_output(source):
        return "its source is also a graph output or copied elsewhere"
    if source not in units or units[source][1] is None or source not in units[source][1].members:
        return "its source is not stored by a kernel"
    position, kernel = units[source]
    if kernel.space is not None or generated.variants(kernel) is None:
        return "its source's kernel is not a generated pointwise kernel"
    have, want = meta(source), meta(target)
    if (
        have.dtype != want.dtype
        or not same_shape(have.shape, want.shape)
        or not same_shape(have.shape, kernel.shape)
        or not same_shape(output_strides(have), want.stride())
    ):
        return "its source and target differ in dtype, shape or strides"
    if _reaches_output(target):
        return "its target is also a graph output"
    for reader in _readers(target):
        if reader is copy:
            continue
        if reader not in units:
            return f"{reader.name} reads its target and runs in no step"
        if units[reader][1] is kernel:
            if _is_view(reader) or target not in reader.all_input_nodes:
                return f"{reader.name} reads its target through a view in the writing kernel"
            if not same_shape(meta(reader).shape, kernel.shape):
                return f"{reader.name} reads its target at other elements in the writing kernel"
        elif units[reader][0] >= position:
            return f"{reader.name} reads its target's old value after the writing kernel"
    at = kernel.members.index(source)
    if have.numel() != 1 and not all(
        _reads_where_it_writes(v, target, at) for v in generated.variants(kernel)
    ):
        return "the writing kernel's code reads its target at other elements than it writes"
    return None


def _element(address: ir.Address) -> tuple[str, ...]:
    """The index names an address reads its element at (a widening term reads none)."""
    return tuple(index for index, stride in address.terms if stride != "0")


def _reads_where_it_writes(source: KernelSource, target: fx.Node, position: int) -> bool:
    """Whether every load of `target` in the kernel reads the element that the store into output
    `position` writes (same strides: the copy is plain)."""
    pointers, through_views = set(), set()
    for name, arg in source.params:
        if arg.kind == "tensor" and arg.node is not None:
            base = arg.node
            while _is_view(base) and base.args and isinstance(base.args[0], fx.Node):
                base = base.args[0]
            if base is target:
                (pointers if arg.node is target else through_views).add(name)
    found = source.accesses
    if any(isinstance(a, ir.Load) and a.address.pointer in through_views for a in found):
        return False  # a view's strides are not the target's: no element is provably the same
    written = {
        _element(a.address)
        for a in found
        if isinstance(a, ir.Store) and a.address.pointer == f"out{position}_ptr"
    }
    read = {_element(a.address) for a in found if isinstance(a, ir.Load) and a.address.pointer in pointers}
    return len(written) == 1 and read <= written


def fold(plan: Plan, generated: Generated) -> tuple[Plan, dict[fx.Node, fx.Node]]:
    """`plan` without the `copy_` calls that kernels now make themselves, and which member is stored
    into which graph input. A copy left eager keeps its place among the plan's fallbacks, with the
    reason it was not folded (the log and `fuser.explain` show it)."""
    units = _units(plan.steps)
    into: dict[fx.Node, fx.Node] = {}
    kept: dict[fx.Node, str] = {}
    for step in plan.steps:
        if isinstance(step, fx.Node) and step.target is aten.copy_.default:
            reason = _obstacle(step, units, generated)
            if reason is None:
                into[step.args[1]] = step.args[0]
            else:
                kept[step] = f"not written in place: {reason}"
    steps = [
        s for s in plan.steps if not (isinstance(s, fx.Node) and s.target is aten.copy_.default) or s in kept
    ]
    fallbacks = [
        (node, kept.get(node, reason))
        for node, reason in plan.fallbacks
        if node.target is not aten.copy_.default or node in kept
    ]
    return Plan(steps, fallbacks), into
