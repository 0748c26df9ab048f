"""Hypothesis strategies for random programs, written to shrink well.

A program is drawn as two lists of *draws* that do not depend on each other — inputs (shape, dtype,
layout) and nodes (an op, operand references, view steps, a scalar, attribute choices) — and then
*resolved* into a `Program` by one deterministic pass that runs every node eagerly on the inputs:

- an operand reference counts back from the newest value, among the values that broadcast with the
  operands already chosen (seen through the operand's view steps), so every reference lands somewhere;
- a view step that does not apply to its operand's shape is left out, an in-place node whose update
  eager would refuse (a broadcast or a dtype change of its target) runs out of place, and a node that
  eager rejects (an operand dtype its spec does not list, an integer division by zero) is left out.

So hypothesis shrinks the lists (fewer nodes, fewer inputs, smaller shapes, earlier ops, no views) and
every shrunk draw is still a program: there is no filter far from its draw. Shrinking moves each choice
towards its first option, so the first options are the plain ones (float32, contiguous, size 3, add).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.fuzz.program import VIEW_KINDS, Input, Node, Operand, Positions, Program, View
from conformance.fuzz.vocab import VOCABULARY, FuzzOp
from conformance.harness.runner import overlaps_itself, supported_dtypes
from conformance.specs.catalog import SPECS
from conformance.specs.samples import SCALARS
from conformance.specs.values import DTYPES, LAYOUTS, replicate

# A row longer than one block: the CPU interpreter's largest block is 2**14 elements, a GPU's 8192.
LONG = 2**14 + 27
SIZES = (3, 2, 1, 5, 0, 4, 7)
# Where the base shape's one long dim goes, if it has one: its first or its last dim, in half the
# programs. Drawn apart from the sizes so that long rows stay common whatever else hypothesis favours
# (a long row is what a looped row kernel's bugs need; as 1 size in 8 it was in too few programs).
LONG_AT = (None, None, 0, -1)
MAX_NUMEL = 4 * LONG  # no value larger: memory and the interpreter's time stay small
# float32 twice: the dtype most programs compute in, and the one whose values stay exact through
# the basic operations (see FuzzOp.discontinuous).
FUZZ_DTYPES = ("float32", "float32", "bfloat16", "float16", "int64", "int32", "bool")
HALF = (torch.float16, torch.bfloat16)
# Ops drawn more often than the rest: the common ones, and the non-commutative binary ones.
COMMON = (
    "aten.add.Tensor",
    "aten.mul.Tensor",
    "aten.sub.Tensor",
    "aten.div.Tensor",
    "aten.neg.default",
    "aten.exp.default",
    "aten.maximum.default",
    "aten.where.self",
    "aten._to_copy.default",
    "aten.pow.Tensor_Tensor",
    "aten.atan2.default",
    "aten.lt.Tensor",
)
EXACT_REDUCTIONS = {"amax", "amin", "max", "min", "any", "all", "argmax", "argmin"}


@dataclass(frozen=True)
class InputDraw:
    drop: int  # leading dims of the program's base shape it lacks (0 or 1)
    ones: int  # 0, or 1 + the dim that has size 1 (it broadcasts against the others)
    dtype: str
    layout: str
    specials: bool


@dataclass(frozen=True)
class NodeDraw:
    op: int  # an index into the vocabulary
    refs: tuple[int, ...]  # per tensor operand: how far back among the values that fit
    views: tuple[tuple[int, str, int, int], ...]  # (tensor operand, view kind, a, b)
    scalar: Any
    variant: int
    dim: int
    keepdim: bool
    inplace: bool
    output: bool  # also returned when later nodes read it (it must then be stored)
    cast: str | None  # its result then cast to this dtype (`.to(dtype)`, as mixed precision does)


def input_draws(dtypes: tuple[str, ...] = FUZZ_DTYPES) -> st.SearchStrategy[InputDraw]:
    return st.builds(
        InputDraw,
        drop=st.integers(0, 1),
        ones=st.integers(0, 3),
        dtype=st.sampled_from(dtypes),
        layout=st.sampled_from(LAYOUTS),
        specials=st.booleans(),
    )


def node_draws(vocab: tuple[FuzzOp, ...], only: int | None = None) -> st.SearchStrategy[NodeDraw]:
    """Node draws; with `only`, of that vocabulary index alone."""
    index = {op.name: i for i, op in enumerate(vocab)}
    common = [index[name] for name in COMMON if name in index]
    pointwise = [i for i, op in enumerate(vocab) if op.kind == "pointwise"]
    # Gather and scatter are drawn among the reductions (1 node in 70 calls one; validation's fuzz stage
    # asks for them by name). A wider share changed which programs the `ci` profile's fixed seed draws,
    # and it then missed two of the planted kinds (tests/quality/test_fuzz_finds_planted_miscompiles.py).
    reductions = [i for i, op in enumerate(vocab) if op.kind in ("reduction", "indexed")]
    # The common ops twice: half the nodes are one of them, the rest any pointwise op or reduction.
    choices = [st.sampled_from(group) for group in (common, common, pointwise, reductions) if group]
    if only is not None:
        choices = [st.just(only)]
    view = st.tuples(st.integers(0, 2), st.sampled_from(VIEW_KINDS), st.integers(0, 23), st.integers(0, 5))
    return st.builds(
        NodeDraw,
        op=st.one_of(*choices),
        refs=st.lists(st.integers(0, 5), min_size=3, max_size=3).map(tuple),
        views=st.lists(view, max_size=2).map(tuple),
        scalar=st.sampled_from(SCALARS),
        variant=st.integers(0, 3),
        dim=st.integers(0, 3),
        keepdim=st.booleans(),
        inplace=st.booleans(),
        output=st.sampled_from((False, False, False, True)),
        cast=st.sampled_from((None, None, None, "float32", "bfloat16", "float16", "int32", "bool")),
    )


@st.composite
def programs(
    draw,
    vocab: tuple[FuzzOp, ...] = VOCABULARY,
    max_nodes: int = 5,
    max_inputs: int = 3,
    require_op: str | tuple[str, ...] | None = None,
) -> Program | None:
    """A random program, or None where no node could be resolved (the caller rejects it). Its inputs'
    shapes derive from one base shape (fewer leading dims, some dims of size 1), as a real program's
    do, so that most pairs broadcast. With `require_op` (a vocabulary op's name, or several), every
    program calls one of those ops at least once (or its in-place twin), among other drawn nodes: a
    node of each is drawn, and a program whose resolution left all of them out is None."""
    required = (require_op,) if isinstance(require_op, str) else tuple(require_op or ())
    base = draw(st.lists(st.sampled_from(SIZES), max_size=3).map(tuple))
    long_at = draw(st.sampled_from(LONG_AT))
    if base and long_at is not None:
        base = tuple(LONG if d == long_at % len(base) else size for d, size in enumerate(base))
    if not required:
        inputs = draw(st.lists(input_draws(), min_size=1, max_size=max_inputs))
        nodes = draw(st.lists(node_draws(vocab), min_size=2, max_size=max_nodes))
    else:
        names = [op.name for op in vocab]
        only = [names.index(name) for name in required]
        needed = [draw(d) for index in only for d in _inputs_for(vocab[index])]
        inputs = needed + draw(st.lists(input_draws(), max_size=max(0, max_inputs - len(needed))))
        # Several required ops take the places of drawn ones: a program stays about as long.
        others = max(1, max_nodes - len(only))
        nodes = draw(st.lists(node_draws(vocab), min_size=1, max_size=others))
        # One more node for each required op, at a drawn place among the others: it reads values
        # computed before it and is read by those after, as any node is.
        for index in only:
            nodes.insert(draw(st.integers(0, len(nodes))), draw(node_draws(vocab, index)))
    seed = draw(st.integers(0, 1000))
    program = resolve(base, inputs, nodes, seed, vocab)
    if program is not None and required and not any(calls(program, op, vocab) for op in required):
        return None  # the resolution left every required node out (no operand of a dtype it takes)
    return program


def _inputs_for(op: FuzzOp) -> list[st.SearchStrategy[InputDraw]]:
    """Inputs a required op can read whatever else is drawn: one in a dtype eager accepts for it (a
    bitwise op takes no float, which most inputs are), and a bool one where it takes a mask (where)."""
    takes = tuple(d for d in FUZZ_DTYPES if d in eager_dtypes(op.name)) or FUZZ_DTYPES
    masks = any(kind == "mask" for _, kind in op.operands)
    return [input_draws(takes)] + [input_draws(("bool",))] * masks


@functools.cache
def eager_dtypes(op: str) -> tuple[str, ...]:
    """The dtypes eager takes for `op` (its spec lists every dtype; eager's samples say which)."""
    return tuple(supported_dtypes(SPECS[op], "cpu"))


def calls(program: Program, op: str, vocab: tuple[FuzzOp, ...] = VOCABULARY) -> bool:
    """Whether `program` calls the vocabulary op `op` (or its in-place twin)."""
    return any(_by_name(vocab, node.op).name == op for node in program.nodes)


def smaller(program: Program) -> list[Program]:
    """Programs one step smaller than `program` (a node, one node's view steps or an input left out),
    resolved from its draws: candidates for a last greedy pass after hypothesis' shrinking, which
    minimizes the draws, not the ops a reader counts."""
    base, inputs, nodes, vocab = program.draws
    variants = [(inputs, nodes[:i] + nodes[i + 1 :]) for i in range(len(nodes))]
    variants += [
        (inputs, (*nodes[:i], dataclasses.replace(node, views=()), *nodes[i + 1 :]))
        for i, node in enumerate(nodes)
        if node.views
    ]
    variants += [(inputs[:i] + inputs[i + 1 :], nodes) for i in range(len(inputs)) if len(inputs) > 1]
    # A node left out where another node must change for the program to keep failing. Its operands: the
    # nodes after it count back over one value fewer, so a later `sum(v0)` would read another value
    # unless its reference moves with it. Its views: without the permute that read it back,
    # `add(v0.reshape(1, 3), v0)` fails only as `add(v0.reshape(3, 1), v0)`.
    for i in range(len(nodes)):
        rest = nodes[:i] + nodes[i + 1 :]
        for j, node in enumerate(rest[i:], start=i):
            for slot, ref in enumerate(node.refs):
                if ref > 0:
                    refs = (*node.refs[:slot], ref - 1, *node.refs[slot + 1 :])
                    variants.append(
                        (inputs, (*rest[:j], dataclasses.replace(node, refs=refs), *rest[j + 1 :]))
                    )
        for j, node in enumerate(rest):
            for k, (operand, kind, a, b) in enumerate(node.views):
                for changed in ((operand, kind, a + 1, b), (operand, kind, a, b + 1)):
                    views = (*node.views[:k], changed, *node.views[k + 1 :])
                    variants.append(
                        (inputs, (*rest[:j], dataclasses.replace(node, views=views), *rest[j + 1 :]))
                    )
    found = [resolve(base, list(i), list(n), program.seed, vocab) for i, n in variants]
    return sorted((p for p in found if p is not None and _size(p) < _size(program)), key=_size)


def _size(program: Program) -> tuple[int, int]:
    return program.op_count, len(program.inputs)


# --- resolution ---------------------------------------------------------------------------------


@dataclass
class Value:
    tensor: torch.Tensor  # its eager value (an in-place node changes its target's)
    exact: bool  # the same bits in eager and in any kernel (see FuzzOp.discontinuous)
    used: bool = False


def _shape(base: tuple[int, ...], draw: InputDraw) -> tuple[int, ...]:
    """The base shape less `drop` leading dims, one dim maybe of size 1. At most one long dim,
    and then the others small: a long row, not a large tensor."""
    if LONG in base:
        first = base.index(LONG)
        base = tuple(LONG if d == first else min(size, 2) for d, size in enumerate(base))
    kept = base[min(draw.drop, len(base)) :]
    return tuple(1 if draw.ones == d + 1 else size for d, size in enumerate(kept))


def resolve(
    base: tuple[int, ...],
    input_draws: list[InputDraw],
    node_draws: list[NodeDraw],
    seed: int,
    vocab: tuple[FuzzOp, ...],
) -> Program | None:
    inputs = [Input(_shape(base, d), d.dtype, d.layout, d.specials) for d in input_draws]
    values = [Value(spec.make(position, seed), exact=True) for position, spec in enumerate(inputs)]
    nodes: list[Node] = []
    returned: list[int] = []
    for node_draw in node_draws:
        op = vocab[node_draw.op % len(vocab)]
        made = _node(op, node_draw, values, len(inputs))
        if made is None:
            continue
        node, value = made
        if node_draw.output:
            returned.append(len(values))
        nodes.append(node)
        values.append(value)
        cast = _cast(node_draw.cast, values) if node_draw.cast else None
        if cast is not None:
            nodes.append(cast[0])
            values.append(cast[1])
    if not nodes:
        return None
    k = len(inputs)
    sinks = [i for i in range(k, len(values)) if not values[i].used or i in returned]
    # Each input's random values come from the domain of the first op that reads it (acos: [-1, 1]).
    for position in range(k):
        for node in nodes:
            op = _by_name(vocab, node.op)
            if op.spec.domain and any(o.value == position for o in node.operands):
                inputs[position] = Input(**{**inputs[position].__dict__, "domain": op.spec.domain})
                break
    ops = [_by_name(vocab, n.op) for n in nodes]
    differentiable = (
        all(op.spec.differentiable and not _is_inplace(n) for op, n in zip(ops, nodes, strict=True))
        and not any((op.spec.unspecified_at or {}).get("bwd") for op in ops)
        and any(v.tensor.dtype.is_floating_point for v in values[:k])
        and any(values[i].tensor.dtype.is_floating_point for i in sinks)
    )
    return Program(
        tuple(inputs),
        tuple(nodes),
        tuple(sinks),
        dtypes=tuple(str(v.tensor.dtype).removeprefix("torch.") for v in values),
        differentiable=differentiable,
        seed=seed,
        draws=(base, tuple(input_draws), tuple(node_draws), vocab),
    )


def _by_name(vocab: tuple[FuzzOp, ...], name: str) -> FuzzOp:
    for op in vocab:
        if name in (op.name, op.inplace):
            return op
    raise KeyError(name)


def reads_elsewhere(target: torch.Tensor, operand: torch.Tensor) -> bool:
    """Whether `operand` reads `target`'s memory other than element for element: an in-place update of
    `target` that reads it has no one answer (eager's reads follow its loop order: `v.xlogy_(v[1::2])`
    read the updated v[1] for v[2], a compiled program the value before the call; validation's fuzz
    stage, 2026-11-27). The same view (`v.add_(v)`) reads each element before writing it: well defined."""
    if target.untyped_storage().data_ptr() != operand.untyped_storage().data_ptr():
        return False
    same_view = (target.storage_offset(), target.shape, target.stride())
    return same_view != (operand.storage_offset(), operand.shape, operand.stride())


def product_depends_on_order(operand: torch.Tensor, attrs: dict[str, Any]) -> bool:
    """Whether a product over `attrs`' dims has no one answer: a row of finite values whose large
    factors overflow the accumulator when taken first (so 0 * inf = nan, or inf * tiny = inf) while the
    row also holds a zero or factors that underflow it when taken first. Eager on cuda multiplies in
    another order than eager on cpu, and a split kernel in a third: nan, -0.0 and -0.0 for one row
    (validation's fuzz stage on sm_90, 2026-11-27). The same rule as sums of +-1e30 (program.Input)."""
    dtype = attrs.get("dtype") or operand.dtype
    if not dtype.is_floating_point:
        return False  # integers wrap: the same bits in every order
    accumulator = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32)
    magnitude = operand.detach().double().abs()
    dims = attrs.get("dim")
    dims = list(range(magnitude.dim())) if dims is None else dims
    if magnitude.dim() == 0:
        magnitude, dims = magnitude.reshape(1), [0]
    finite = magnitude.isfinite().all(dims)
    logs = torch.where(magnitude > 0, magnitude.log2(), 0.0).nan_to_num(posinf=0.0)
    overflows = logs.clamp_min(0).sum(dims) > math.log2(accumulator.max)
    zero = (magnitude == 0).any(dims)
    underflows = zero | (logs.clamp_max(0).sum(dims) < math.log2(accumulator.smallest_normal))
    return bool((finite & overflows & underflows).any())


def _is_inplace(node: Node) -> bool:
    return node.op.split(".")[1].endswith("_")


def _node(op: FuzzOp, draw: NodeDraw, values: list[Value], inputs: int) -> tuple[Node, Value] | None:
    if op.kind == "indexed":
        return _indexed_node(op, draw, values)
    kinds = [kind for _, kind in op.operands] if op.kind == "pointwise" else ["tensor"]
    tensor_slots = [k for k, kind in enumerate(kinds) if kind != "scalar"]
    chosen: list[tuple[int, torch.Tensor, tuple[View, ...]]] = []  # (value number, viewed value, views)
    takes = eager_dtypes(op.name)
    for j, k in enumerate(tensor_slots):
        steps = [v[1:] for v in draw.views if v[0] % len(tensor_slots) == j]
        fits = []
        # An in-place node updates an input (a parameter, a buffer), as programs mostly do.
        wants_inplace = j == 0 and draw.inplace and op.inplace is not None
        for number in reversed(range(inputs if wants_inplace else len(values))):
            tensor = values[number].tensor
            if kinds[k] == "mask" and tensor.dtype != torch.bool:
                continue
            if kinds[k] != "mask" and str(tensor.dtype).removeprefix("torch.") not in takes:
                continue  # a dtype eager rejects, or that its spec does not list (not tested)
            viewed, views = _apply_views(tensor, steps)
            if chosen and not _broadcastable([viewed, *(c[1] for c in chosen)]):
                continue
            fits.append((number, viewed, views))
        if not fits:
            return None
        # Values not yet an operand of this node come first: `x - max(x)` rather than `max(x) - max(x)`
        # (a shared operand stays possible, further back).
        taken = {c[0] for c in chosen}
        fits = [f for f in fits if f[0] not in taken] + [f for f in fits if f[0] in taken]
        chosen.append(fits[draw.refs[j % len(draw.refs)] % len(fits)])
    if math.prod(torch.broadcast_shapes(*(c[1].shape for c in chosen))) > MAX_NUMEL:
        return None  # a long row broadcast against its own transpose: a large tensor, not a long row
    operands, called = [], []
    tensors = iter(chosen)
    for kind in kinds:
        if kind == "scalar":
            operands.append(Operand(None, scalar=draw.scalar))
            called.append(draw.scalar)
        else:
            number, viewed, views = next(tensors)
            operands.append(Operand(number, views=views))
            called.append(viewed)
    attrs = _attrs(op, draw, chosen[0][1])
    if _integer_cast(attrs) and not _in_range(chosen[0][1]):
        return None  # a float-to-integer cast of nan, inf or a huge value: undefined behaviour in C++
    names = [name for name, _ in op.operands] if op.kind == "pointwise" else ["self"]
    keywords = tuple(names[op.positional :]) if op.kind == "pointwise" else ()
    target = chosen[0][0]
    inplace = (
        draw.inplace
        and op.inplace is not None
        and not chosen[0][2]
        and not overlaps_itself(values[target].tensor)
        and not any(reads_elsewhere(values[target].tensor, viewed) for _, viewed, _ in chosen[1:])
        and kinds[0] != "scalar"
    )
    result = None
    for name in [op.inplace] * inplace + [op.name]:
        node = Node(name, tuple(operands), keywords, tuple(attrs.items()))
        result = _eager_call(node, called, probe=name == op.inplace)
        if result is not None:
            break
    if result is None:
        return None
    if isinstance(result, tuple | list):
        result = result[0]
        node = Node(node.op, node.operands, node.keywords, node.attrs, pick=0)
    if not isinstance(result, torch.Tensor):
        return None
    if op.packet == "prod" and product_depends_on_order(chosen[0][1], attrs):
        return None  # a row whose partial products leave the range in some order: no one answer
    readers = [values[c[0]] for c in chosen]
    floating_in = any(m.dtype.is_floating_point for _, m, _ in chosen)
    jumps = op.discontinuous or (floating_in and not result.dtype.is_floating_point)
    if jumps and not all(v.exact for v in readers):
        return None  # eager's rounding of an intermediate and a kernel's wider one: no one answer
    exactly_rounded = (op.exact or op.packet in EXACT_REDUCTIONS) and result.dtype not in HALF
    exact = all(v.exact for v in readers) and (not result.dtype.is_floating_point or exactly_rounded)
    for reader in readers:
        reader.used = True
    return node, Value(result, exact)


def _indexed_node(op: FuzzOp, draw: NodeDraw, values: list[Value]) -> tuple[Node, Value] | None:
    """A gather, or a scatter of the drawn scalar, along a drawn dim of a drawn value (through its view
    steps), at 1 to 3 positions a row that the program computes (`Positions`)."""
    takes = eager_dtypes(op.name)
    fits = [
        n for n in reversed(range(len(values))) if str(values[n].tensor.dtype).removeprefix("torch.") in takes
    ]
    if not fits:
        return None
    number = fits[draw.refs[0] % len(fits)]
    source, views = _apply_views(values[number].tensor, [v[1:] for v in draw.views])
    if source.dim() == 0 or 0 in source.shape:
        return None  # no position to read (a 0-d tensor's gather is a copy; an empty dim has none)
    dim = draw.dim % source.dim()
    shape = (*source.shape[:dim], 1 + draw.variant % 3, *source.shape[dim + 1 :])
    positions = Positions(shape, source.shape[dim], salt=draw.refs[1], like=number)
    operands = (Operand(number, views=views), Operand(None, positions=positions))
    attrs = {"dim": dim} | ({"value": draw.scalar} if op.packet == "scatter" else {})
    node = Node(op.name, operands, keywords=("index",), attrs=tuple(attrs.items()))
    result = _eager_call(node, [source, positions.make(source.device)], probe=False)
    if not isinstance(result, torch.Tensor):
        return None
    values[number].used = True
    # A selection: as exact as what it selects from (a scatter's value rounds once, the same everywhere).
    return node, Value(result, values[number].exact)


def _in_range(tensor: torch.Tensor) -> bool:
    if not tensor.dtype.is_floating_point:
        return True
    return bool((tensor.isfinite() & (tensor.abs() < 2**15)).all())


def _cast(dtype: str, values: list[Value]) -> tuple[Node, Value] | None:
    """The newest value cast to `dtype` (a `_to_copy` node), under the rules of any other node."""
    source = values[-1]
    if str(source.tensor.dtype).removeprefix("torch.") == dtype:
        return None
    target = DTYPES[dtype]
    jumps = source.tensor.dtype.is_floating_point and not target.is_floating_point
    if jumps and (not source.exact or (_integer_cast({"dtype": target}) and not _in_range(source.tensor))):
        return None
    node = Node("aten._to_copy.default", (Operand(len(values) - 1),), attrs=(("dtype", target),))
    source.used = True
    return node, Value(source.tensor.to(target), source.exact)  # one rounding, the same everywhere


def _attrs(op: FuzzOp, draw: NodeDraw, operand: torch.Tensor) -> dict[str, Any]:
    # A reduction's integer accumulator dtype casts first: no one answer for nan (see _in_range).
    variants = [v for v in op.variants if op.kind != "reduction" or not _integer_cast(v)] or [{}]
    attrs = dict(variants[draw.variant % len(variants)])
    if op.kind != "reduction":
        return attrs
    rank = max(operand.dim(), 1)
    dim = -(1 + draw.dim % rank)
    if op.dim == "int":
        attrs["dim"] = dim
    elif op.dim == "list":
        attrs["dim"] = [dim]
    if op.keepdim:
        attrs["keepdim"] = draw.keepdim
    return attrs


def _integer_cast(variant: dict[str, Any]) -> bool:
    dtype = variant.get("dtype")
    return isinstance(dtype, torch.dtype) and not dtype.is_floating_point and dtype != torch.bool


def _eager_call(node: Node, tensors: list, probe: bool) -> Any:
    """The node's eager result, or None where eager rejects it. An in-place call is first tried on a
    copy of its target, so that a rejected one leaves the target as it was."""
    namespace, packet, overload_name = node.op.split(".")
    overload = getattr(getattr(getattr(torch.ops, namespace), packet), overload_name)
    positional = len(tensors) - len(node.keywords)
    args, kwargs = tensors[:positional], dict(zip(node.keywords, tensors[positional:], strict=True))
    kwargs |= dict(node.attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if probe:
                overload(replicate(args[0]), *args[1:], **kwargs)
            return overload(*args, **kwargs)
        except Exception:
            return None


def _broadcastable(tensors: list[torch.Tensor]) -> bool:
    try:
        torch.broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError:
        return False
    return True


def _apply_views(
    tensor: torch.Tensor, steps: list[tuple[str, int, int]]
) -> tuple[torch.Tensor, tuple[View, ...]]:
    views = []
    for kind, a, b in steps:
        view = _view(kind, a, b, tuple(tensor.shape))
        if view is None:
            continue
        try:
            tensor = view.apply(tensor)
        except RuntimeError:
            continue
        views.append(view)
    return tensor, tuple(views)


def _view(kind: str, a: int, b: int, shape: tuple[int, ...]) -> View | None:
    """The view step `kind` made concrete for `shape`, or None where it does not apply."""
    rank = len(shape)
    if kind == "permute" and rank >= 2:
        orders = [p for p in itertools.permutations(range(rank)) if list(p) != list(range(rank))]
        return View("permute", orders[a % len(orders)])
    if kind == "transpose" and rank >= 2:
        first = a % rank
        second = b % rank if b % rank != first else (first + 1) % rank
        return View("transpose", (first, second))
    if kind == "slice" and rank >= 1:
        dim, start = a % rank, b % 2
        if b // 2 == 2:  # one element: a size-1 dim, which broadcasts against the rest
            return View("slice", (dim, start, None, start + 1))
        return View("slice", (dim, start, 2 + b // 2, None))
    if kind == "expand":
        if 1 in shape:
            return View("expand", tuple(3 if size == 1 else size for size in shape))
        return View("expand", (2, *shape)) if rank < 4 else None
    if kind == "reshape" and rank >= 2:
        d = a % (rank - 1)
        return View("reshape", (*shape[:d], shape[d] * shape[d + 1], *shape[d + 2 :]))
    if kind == "reshape" and rank == 1:
        return View("reshape", (1, shape[0]) if a % 2 == 0 else (shape[0], 1))
    if kind == "unsqueeze" and rank < 4:
        return View("unsqueeze", (a % (rank + 1),))
    return None
