"""Write one readable Triton kernel for a `fuser.plan.partition.Kernel`.

A kernel walks its output shape in blocks of BLOCK elements. Each element's position is turned into
one index per dimension only when some access needs it: a contiguous tensor of the output's shape is
read and written at the flat offset, which keeps loads and stores vectorized. Every other tensor is
read through its strides, which the launcher passes at run time, so broadcasting (stride 0),
transposes, slices and storage offsets need no copies. Values of a half dtype are held in fp32 and
rounded to their dtype where they are made, as eager rounds each op's result: a value then reads the
same on every path (in this kernel, through memory, through a cast), whichever way the program was
partitioned.
"""

from __future__ import annotations

import hashlib
import textwrap
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import fx
from torch.utils._pytree import tree_leaves

from fuser.emit import ir
from fuser.emit.narrowing import hides_widening
from fuser.lower.dtypes import HALF_DTYPES, arithmetic_dtype, value_dtype
from fuser.lower.nodes import bind_arguments, common_dtype, meta, operand_dtypes, tensor_meta
from fuser.lower.ops import (
    CPU_SCALAR_OTHER,
    INDEXED_BY_OVERLOAD,
    POINTWISE_BY_OVERLOAD,
    SCATTER_BY_OVERLOAD,
    VIEW_BY_OVERLOAD,
    Result,
    Typing,
)
from fuser.lower.reductions import REDUCTION_BY_OVERLOAD, is_reduction
from fuser.lower.shapes import same, same_shape
from fuser.lower.views import (
    Index,
    at_position,
    broadcast_index,
    contiguous_strides,
    scatter_pieces,
    scatter_positions,
    source_index,
)
from fuser.plan.partition import Kernel
from fuser.testing import miscompiles

INT32_LIMIT = 2**31 - 1
MAX_BLOCK = 2**16  # the largest BLOCK any launcher uses: offsets up to numel + MAX_BLOCK must fit


@dataclass(frozen=True)
class Arg:
    """What the launcher passes for one kernel parameter."""

    # "tensor" (a node's value), "stride" (of a node's value), "output", "output_stride", "int", or
    # "partials" (a split reduction's workspace of partial results, one per split and row).
    kind: str
    node: fx.Node | None = None
    index: int = 0  # the dimension of a stride, the output's position, or the partials' number
    value: int = 0  # an "int" argument's value
    dtype: torch.dtype | None = None  # the partials' dtype


@dataclass(frozen=True)
class KernelSource:
    """One Triton kernel as IR: its function's statements and signature, what each parameter is bound to,
    and the header naming what it covers. It is printed (`source`) only when it is compiled or shown: a
    pass compares and rewrites kernels by their statements (`fuser.plan.horizontal`)."""

    name: str
    params: tuple[tuple[str, Arg], ...]
    covers: tuple[str, ...]  # the aten nodes the kernel computes, as "name = aten.op(args)"
    # Inputs read at the flat offset: the launcher checks that they are contiguous.
    flat_inputs: tuple[fx.Node, ...]
    header: str  # comment lines: what the kernel is and the aten nodes it covers
    signature: tuple[str, ...]  # the function's parameters as printed, its block sizes' included
    statements: tuple[ir.Statement, ...]  # the function's body
    # "pointwise", or a row kernel: "persistent" (a row per block), "looped", or the two stages of a
    # split reduction: "split_partials" (each program reduces one slice of the columns) and
    # "split_combine" (reduces the slices' partial results and finishes the row); or "row_groups", a
    # persistent kernel whose programs walk groups of rows and sum its column sums over them, before a
    # "split_combine" of the column kernel adds up the groups' sums; or "horizontal".
    kind: str = "pointwise"
    contiguous_rows: bool = False  # a row kernel whose reduced dims are innermost in memory
    row_inputs: int = 0  # a row kernel's inputs as large as its space (row_codegen.whole_inputs)
    row_outputs: int = 0  # and the values it stores that are (row_codegen.whole_outputs)
    int64: bool = False  # whether it indexes in int64

    @cached_property
    def function(self) -> str:
        """The `@triton.jit` function, printed from the statements."""
        return function(self.name, list(self.signature), ir.lines(self.statements))

    @cached_property
    def source(self) -> str:
        """A Python module holding the kernel: the header, the imports and the function."""
        return f"{self.header}\n{PRELUDE}\n\n{self.function}"

    @cached_property
    def cache_key(self) -> str:
        """The hash of the function (not of the header): equal kernels share a compile."""
        return hashlib.sha256(self.function.encode()).hexdigest()

    @cached_property
    def accesses(self) -> list[ir.Load | ir.Store]:
        """Its loads and stores, read from its statements once (`fuser.emit.ir.accesses`)."""
        return ir.accesses(self.statements)


def _is_dense(shape, strides) -> bool:
    """Whether the strides are a permutation of a contiguous layout: no gaps, no overlaps."""
    expected = 1
    for size, stride in sorted(
        ((sz, st) for sz, st in zip(shape, strides, strict=True) if sz != 1), key=lambda p: p[1]
    ):
        if stride != expected:
            return False
        expected *= size
    return True


def output_strides(value: torch.Tensor) -> tuple[int, ...]:
    """Eager's strides where they describe a dense layout (channels-last, transposed), else contiguous."""
    if value.numel() > 0 and _is_dense(value.shape, value.stride()):
        return tuple(value.stride())
    return contiguous_strides(value.shape)


def _span(shape, strides) -> int:
    return 1 + sum((s - 1) * st for s, st in zip(shape, strides, strict=True))  # torch strides are >= 0


def needs_int64(kernel: Kernel) -> bool:
    numel = 1
    for size in kernel.shape:
        numel *= size
    spans = [_span(meta(n).shape, meta(n).stride()) for n in kernel.leaves if tensor_meta(n) is not None]
    spans += [_span(meta(n).shape, output_strides(meta(n))) for n in kernel.members]
    return max([numel + MAX_BLOCK, *spans]) > INT32_LIMIT


def _describe(node: fx.Node) -> str:
    args = ", ".join(a.name if isinstance(a, fx.Node) else repr(a) for a in node.args)
    return f"{node.name} = {node.target}({args})"


def unflatten(flat: str, dims, shape, prefix: str, level: int) -> list[ir.Assign]:
    """Assignments turning the flat position `flat` into one index per dim of `dims` (row-major, size-1
    dims skipped): `{prefix}{d}`, with `size{d}` the runtime size of dim d."""
    lines, rest = [], flat
    live = [d for d in dims if not same(shape[d], 1)]
    for position, d in enumerate(reversed(live)):
        if position == len(live) - 1:
            lines.append(ir.Assign(f"{prefix}{d}", ir.name(rest), level))
        else:
            size = f"size{d}"
            lines.append(ir.Assign(f"{prefix}{d}", ir.over(f"{rest} % {size}", rest, size), level))
            lines.append(ir.Assign(f"{prefix}rest{d}", ir.over(f"{rest} // {size}", rest, size), level))
            rest = f"{prefix}rest{d}"
    return lines


class Builder:
    """What every kernel kind shares: parameters, loads, values, views, casts and pointwise ops.

    Each temporary has a *level*: 0 for a scalar, 1 for a value per row (row kernels), 2 for a value
    per element. The level picks the mask of a load or store and, in looped row kernels, which
    temporaries live only inside a loop. The body is a list of `fuser.emit.ir` statements: every expression
    is made from its operands and knows what it reads, so levels and liveness come from those records.
    """

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.rank = len(kernel.shape)
        self.int64 = needs_int64(kernel)
        self.params: dict[str, Arg] = {}
        self.body: list[ir.Statement] = []
        self.values: dict[tuple[fx.Node, Index], tuple[ir.Expr, torch.dtype]] = {}
        self.inputs: dict[fx.Node, str] = {}
        self.flat_inputs: list[fx.Node] = []
        self.names: Counter[str] = Counter()
        self.computed = set(kernel.computed)
        self.levels: dict[str, int] = {}
        self.statements: list[ir.Statement] = []  # the function's body, once `build` has made it
        self.opaque_widening = hides_widening(kernel)

    # --- names, parameters and index expressions ---
    def fresh(self, stem: str) -> str:
        number = self.names[stem]
        self.names[stem] += 1
        return f"{stem}{number}"

    def int_param(self, hint: str, value: int) -> str:
        self.params.setdefault(hint, Arg("int", value=value))
        return hint

    def emit(self, stem: str, expr: ir.Expr, dtype: torch.dtype | None = None) -> ir.Expr:
        name = self.fresh(stem)
        level = self.level(expr)
        self.body.append(ir.Assign(name, expr, level, dtype))
        self.levels[name] = level
        return ir.name(name)

    def index_temp(self, expr: ir.Expr) -> str:
        return self.emit("idx", expr).text

    def level(self, expr: ir.Expr) -> int:
        """The level of an expression: the highest level of the names it reads."""
        return max((self.levels.get(name, 0) for name in expr.reads), default=0)

    def mask_for(self, level: int) -> str | None:
        """The mask of an access at `level` (None: a scalar, unmasked)."""
        return "mask" if level > 0 else None

    def eviction(self, level: int) -> str | None:
        """The cache eviction policy of a load at `level` (none in a pointwise kernel)."""
        return None

    def domain_index(self) -> Index:
        """One index per output dimension (size-1 dimensions read index 0)."""
        return tuple("0" if same(size, 1) else f"i{d}" for d, size in enumerate(self.kernel.shape))

    def domain_index_lines(self) -> list[ir.Assign]:
        """Assignments that turn the flat offset into the domain index (row-major), innermost first."""
        return unflatten("offset", range(self.rank), self.kernel.shape, "i", 2)

    def address(self, pointer: str, index: Index | None, shape, stride_arg) -> ir.Address:
        """`pointer` plus the element offset of `index`; None means the flat offset."""
        if index is None:
            return ir.Address(pointer, (("offset", None),))
        terms = []
        for d, i in enumerate(index):
            if i != "0" and not same(shape[d], 1):
                stride = f"{pointer.removesuffix('_ptr')}_stride{d}"
                self.params[stride] = stride_arg(d)
                terms.append((i, stride))
        return ir.Address(pointer, tuple(terms))

    def _is_flat(self, node: fx.Node, index: Index, strides) -> bool:
        value = meta(node)
        return (
            same_shape(value.shape, self.kernel.shape)
            and same_shape(strides, contiguous_strides(value.shape))
            and index == self.domain_index()
        )

    # --- values ---
    def load(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        value = meta(node)
        if node not in self.inputs:
            self.inputs[node] = f"in{len(self.inputs)}"
            self.params[f"{self.inputs[node]}_ptr"] = Arg("tensor", node=node)
        stem = self.inputs[node]
        pointer = f"{stem}_ptr"
        flat = value.dim() > 0 and self._is_flat(node, index, value.stride())
        if flat and node not in self.flat_inputs:
            self.flat_inputs.append(node)
        address = self.address(
            pointer, None if flat else index, value.shape, lambda d: Arg("stride", node, d)
        )
        held = value_dtype(value.dtype)
        level = self.level(address)
        loaded = ir.Load(address, self.mask_for(level), value.dtype, self.eviction(level))
        return self.emit(f"{stem}_", self.cast(loaded, value.dtype, held), held), held

    def value(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        """A temporary holding `node` at `index`, and the dtype it is held in."""
        if node not in self.computed:  # a testing-only hook (fuser.testing.miscompiles): a no-op by default
            planted = miscompiles.rewrite("leaf_value", None, builder=self, node=node, index=index)
            if planted is not None:
                return planted
        key = (node, index)
        if key not in self.values:
            if node not in self.computed:
                self.values[key] = self.load(node, index)
            elif is_reduction(node):
                self.values[key] = self.reduction(node, index)
            elif node.target in VIEW_BY_OVERLOAD:
                self.values[key] = self.view(node, index)
            elif node.target in SCATTER_BY_OVERLOAD:
                self.values[key] = self.scatter(node, index)
            elif node.target in INDEXED_BY_OVERLOAD:
                self.values[key] = self.indexed(node, index)
            else:
                self.values[key] = self.pointwise(node, index)
        return self.values[key]

    def view(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        return self.value(node.all_input_nodes[0], self.view_index(node, index))

    def view_index(self, node: fx.Node, index: Index) -> Index:
        """The index of the view's source that `index` into the view reads."""
        source = node.all_input_nodes[0]
        kind = VIEW_BY_OVERLOAD[node.target].name
        mapped = source_index(
            kind,
            miscompiles.rewrite("view_args", bind_arguments(node), node=node),
            index,
            meta(source).shape,
            meta(node).shape,
            self,
            f"{kind}{self.names[kind]}",
        )
        self.names[kind] += 1
        return mapped

    def scatter(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        """A scatter's element: the first of its pieces whose condition holds (`fuser.lower.views.scatter_pieces`).
        Every value stays in the dtype the kernel holds the result in: no rounding at a seam (eager's
        slice gradient and cat are exact there too)."""
        kind = SCATTER_BY_OVERLOAD[node.target].name
        # Every tensor argument in order, repeats kept: cat((x, y, x)) reads x twice (all_input_nodes would not).
        sources = [a for a in tree_leaves((node.args, node.kwargs)) if tensor_meta(a) is not None]
        held = value_dtype(meta(node).dtype)
        pieces = scatter_pieces(
            kind,
            bind_arguments(node),
            index,
            meta(node).shape,
            [meta(s).shape for s in sources],
            self,
            f"{kind}{self.names[kind]}",
        )
        self.names[kind] += 1
        if not pieces:  # an empty result: the kernel has no element to compute
            return ir.Const(0, held), held
        *tried, (_, last, last_index) = pieces
        value = self.cast(*self.value(sources[last], last_index), held)
        for condition, source, at in reversed(tried):
            read = self.cast(*self.value(sources[source], at), held)
            value = self.emit(kind, ir.Where(condition, read, value), held)
        return value, held

    def indexed(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        """A gather's or a scatter-of-a-value's element (`fuser.lower.ops.IndexedOp`)."""
        kind = INDEXED_BY_OVERLOAD[node.target].name
        name = f"{kind}{self.names[kind]}"
        self.names[kind] += 1
        args = bind_arguments(node)
        dim = args["dim"] % len(meta(node).shape)  # of rank 1 or more (`partition.lowering_obstacle`)
        return getattr(self, kind)(node, args, dim, index, name)

    def position(self, positions: fx.Node, at: Index, size, name: str) -> tuple[ir.Expr, ir.Expr, str]:
        """The position `positions` holds at `at`, whether it lies in [0, size), and that bound's parameter.
        Out of range, eager raises; a kernel cannot stop, so it asserts (Triton keeps asserts only with
        its `debug` option on), and its callers never read outside the tensor."""
        raw, _ = self.value(positions, at)
        bound = self.int_param(f"{name}_size", size)
        in_range = self.emit("in_range", ir.over(f"({raw} >= 0) & ({raw} < {bound})", raw, bound), torch.bool)
        mask = self.mask_for(self.level(in_range))
        check = f"{in_range} | ~{mask}" if mask else in_range.text
        message = f"{name}: index out of bounds"
        self.body.append(ir.Effect(ir.over(f'tl.device_assert({check}, "{message}")', in_range, mask)))
        return raw, in_range, bound

    def gather(self, node: fx.Node, args: dict, dim: int, index: Index, name: str):
        """`self` read along `dim` at the position `index` holds. Out of range, a float result is nan
        (eager raises): the read itself is clamped into the tensor."""
        shape = meta(args["self"]).shape
        raw, in_range, bound = self.position(args["index"], index, shape[dim], name)
        clamped = self.index_temp(ir.over(f"tl.minimum(tl.maximum({raw}, 0), {bound} - 1)", raw, bound))
        clamped = miscompiles.rewrite("gather_position", clamped, index=index, dim=dim)
        value, held = self.value(args["self"], at_position(index, dim, clamped))
        return self.nan_unless("gathered", [in_range], value, held), held

    def scatter_value(self, node: fx.Node, args: dict, dim: int, index: Index, name: str):
        """`value` where `index` holds this element's position along `dim`, else `self`'s element. Equal
        positions write the same value, so the order of writes does not matter. Where one of the
        positions compared is out of range (eager raises), a float result is nan along that row."""
        out = meta(node)
        held = value_dtype(out.dtype)
        base = self.cast(*self.value(args["self"], index), held)
        positions = args["index"]
        inside, reads = scatter_positions(index, dim, out.shape, meta(positions).shape, self, name)
        hits, checks = [], []
        for at in reads:
            raw, in_range, _ = self.position(positions, at, out.shape[dim], name)
            hits.append(ir.over(f"({raw} == {index[dim]})", raw, index[dim]))
            checks.append(in_range)
        if not hits:
            return base, held
        hit = ir.over(" | ".join(h.text for h in hits), *hits)
        if inside is not None:
            hit = ir.over(f"{inside} & ({hit})", inside, hit)
        written = ir.Const(args["value"], held, out.dtype)
        value = self.emit(name, ir.Where(hit, written, base), held)
        return self.nan_unless(name, checks, value, held), held

    def nan_unless(self, stem: str, checks: list[ir.Expr], value: ir.Expr, held: torch.dtype) -> ir.Expr:
        """`value`, or nan where any of `checks` (positions in range) fails, for a float result: an indexed
        op's answer at a position eager rejects, not a plausible neighbour's. Integers have no nan."""
        if not held.is_floating_point:
            return value
        valid = ir.over(" & ".join(c.text for c in checks), *checks)
        nan = ir.Const(float("nan"), held)
        return self.emit(stem, ir.Where(valid, value, nan), held)

    def made(self, expr: ir.Expr, dtype: torch.dtype) -> ir.Expr:
        """`expr`, a result of `dtype` computed in `arithmetic_dtype(dtype)`, as the kernel holds it: a half
        dtype rounded to its precision here. Kept in float32 instead, a value rounded on one path (a store
        and reload, a clone, a cast) and not on another made exact cancellations leave a residue:
        `clone(x / 3) - x / 3` in bfloat16 (found by the fuzzer, tests/fuser/test_rounding_of_half_values.py)."""
        computed = arithmetic_dtype(dtype)
        if dtype in HALF_DTYPES:
            return self.cast(self.cast(expr, computed, dtype), dtype, value_dtype(dtype))
        return self.cast(expr, computed, value_dtype(dtype))

    def cast(self, expr: ir.Expr, held: torch.dtype, want: torch.dtype) -> ir.Expr:
        """`expr`, of dtype `held`, converted to `want`. bfloat16 converts through its bits, as on a GPU:
        Triton's interpreter flushes bfloat16 subnormals to zero and truncates rather than rounds."""
        if held == want:
            return expr
        if self.opaque_widening and held in HALF_DTYPES:
            return self.cast(ir.Cast(expr, held, torch.float32, opaque=True), torch.float32, want)
        if held == torch.bfloat16:
            return self.cast(ir.Cast(expr, held, torch.float32), torch.float32, want)
        if want == torch.bfloat16:
            return ir.Cast(self.cast(expr, held, torch.float32), torch.float32, want)
        return ir.Cast(expr, held, want)

    def pointwise(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        op = POINTWISE_BY_OVERLOAD[node.target]
        out = meta(node)
        bound = bind_arguments(node)
        wants = operand_dtypes(op, bound, out.dtype)
        operands = []
        common = common_dtype(op, bound)
        # Eager's CPU kernel for this op takes a 0-dim `other` as a CPU scalar, at its own value.
        cpu_scalar_other = op.name in CPU_SCALAR_OTHER and self.kernel.device.type == "cpu"
        for (arg_name, typing), want in zip(op.operands, wants, strict=True):
            arg = bound[arg_name]
            if arg is None:
                operands.append(None)
            elif isinstance(arg, fx.Node):
                arg_index = broadcast_index(index, out.shape, meta(arg).shape)
                arg_index = miscompiles.rewrite(
                    "operand_index", arg_index, builder=self, arg=arg, out_shape=out.shape
                )
                name, held = self.value(arg, arg_index)
                # A 0-dim float32 (or integer) tensor meeting a half-precision one promotes to the half
                # dtype: eager rounds it to that dtype first, then computes widened (found by the fuzzer),
                # except where its CPU kernel takes the operand as a CPU scalar (`CPU_SCALAR_OTHER`).
                promoted = {Typing.COMMON: common, Typing.OUT: out.dtype}.get(typing)
                if cpu_scalar_other and arg_name == "other" and not meta(arg).shape:
                    promoted = None
                if promoted is not None and meta(arg).dtype != promoted != arithmetic_dtype(promoted):
                    name, held = self.cast(name, held, promoted), promoted
                operands.append(self.cast(name, held, want))
            else:
                operands.append(ir.Const(arg, want, common if typing is Typing.COMMON else None))
        attrs = miscompiles.rewrite("pointwise_attrs", {a: bound[a] for a in op.attrs}, node=node)
        if op.wants_out_dtype:
            attrs["out_dtype"] = out.dtype
        if op.wants_device:
            attrs["device"] = self.kernel.device.type
        args = [bound[arg_name] for arg_name, _ in op.operands]
        operands = miscompiles.rewrite(
            "pointwise_operands", operands, builder=self, node=node, args=args, wants=wants
        )
        render = op.renderer_for([w for w in wants if w is not None])
        texts = [None if o is None else o.text for o in operands]
        text = miscompiles.rewrite("pointwise_expr", render(*texts, **attrs), node=node, op=op)
        # A renderer that returns an operand as it is (an integer floor) keeps that operand, a bare name.
        unchanged = [o for o in operands if o is not None and o.text == text]
        expr = unchanged[0] if unchanged else ir.over(text, *operands)
        held = value_dtype(out.dtype)
        if op.result is Result.OPERAND:
            # An explicit cast: round to the output dtype here, as eager does, then hold it widened.
            (operand_held,) = [w for w in wants if w is not None]
            expr = self.cast(expr, operand_held, out.dtype)
            expr = self.cast(expr, out.dtype, held) if out.dtype != held else expr
        elif op.result is Result.BOOL:
            expr = self.cast(expr, torch.bool, held)
        else:
            expr = self.made(expr, out.dtype)
        return self.emit(op.name, expr, held), held

    def reduction(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        raise NotImplementedError(f"{node.target} is a reduction; only a row kernel computes it")

    def ordered_params(self) -> list[str]:
        rank = {"tensor": 0, "partials": 0, "output": 1, "stride": 2, "output_stride": 3, "int": 4}
        return sorted(self.params, key=lambda p: (rank[self.params[p].kind], list(self.params).index(p)))

    def output_address(self, position: int, node: fx.Node, index: Index | None) -> ir.Address:
        """Register output `position` and return the address of `index` in it (None: flat)."""
        pointer = f"out{position}_ptr"
        self.params[pointer] = Arg("output", node=node, index=position)
        stride_arg = lambda d: Arg("output_stride", index=position, value=d)  # noqa: E731
        return self.address(pointer, index, meta(node).shape, stride_arg)


class PointwiseBuilder(Builder):
    """A kernel over one shape, walked in flat blocks of BLOCK elements."""

    BLOCKS = ("BLOCK",)  # its block sizes: the launcher's constexpr arguments

    def __init__(self, kernel: Kernel):
        super().__init__(kernel)
        self.levels.update({"offset": 2, **{f"i{d}": 2 for d in range(self.rank)}})

    # --- the kernel ---
    def store(self, position: int, node: fx.Node) -> None:
        value = meta(node)
        index = self.domain_index()
        name, held = self.value(node, index)
        flat = self._is_flat(node, index, output_strides(value))
        address = self.output_address(position, node, None if flat else index)
        if self.level(address) < 2:
            # One element (every dim size 1): a block of that address, so the block mask applies (Triton
            # 3.6 rejects a scalar pointer with it).
            address = address.widened("offset")
        self.body.append(ir.Effect(ir.Store(address, self.cast(name, held, value.dtype), "mask")))

    def build(self) -> None:
        # Every value before any store: a member may be stored into a graph input that another member
        # reads (`fuser.plan.inplace`), and a load after that store would see the new value.
        for member in self.kernel.members:
            self.value(member, self.domain_index())
        for position, member in enumerate(self.kernel.members):
            self.store(position, member)
        numel = 1
        for size in self.kernel.shape:
            numel = numel * size
        self.int_param("numel", numel)
        index_lines = ir.live(self.domain_index_lines(), self.body)
        for d, size in enumerate(self.kernel.shape):
            if f"size{d}" in ir.reads(index_lines):
                self.int_param(f"size{d}", size)
        start = "pid.to(tl.int64) * BLOCK" if self.int64 else "pid * BLOCK"
        bound = miscompiles.rewrite("block_mask", "numel", builder=self)
        lines = [
            ir.Assign("pid", ir.Expr("tl.program_id(0)"), 0),
            ir.Assign("offset", ir.over(f"{start} + tl.arange(0, BLOCK)", "pid"), 2),
            ir.Assign("mask", ir.over(f"offset < {bound}", "offset", "numel"), 2),
            *index_lines,
            *self.body,
        ]
        self.statements = lines


def function(name: str, params: list[str], lines: list[str]) -> str:
    return (
        f"@triton.jit\ndef {name}({', '.join(params)}):\n" + textwrap.indent("\n".join(lines), "    ") + "\n"
    )


PRELUDE = """\
import triton
import triton.language as tl
from triton.language.extra import libdevice

from fuser import kernel_lib as lib
"""


def kernel_name(kernel: Kernel) -> str:
    ops = []
    for node in kernel.computed:
        op = (
            POINTWISE_BY_OVERLOAD.get(node.target)
            or REDUCTION_BY_OVERLOAD.get(node.target)
            or SCATTER_BY_OVERLOAD.get(node.target)
            or INDEXED_BY_OVERLOAD.get(node.target)
        )
        if op is not None and op.name not in ops:
            ops.append(op.name)
    return "fused_" + "_".join(ops[:4]) + ("_etc" if len(ops) > 4 else "")


def package(
    builder: Builder,
    kind: str,
    contiguous_rows: bool = False,
    row_inputs: int = 0,
    row_outputs: int = 0,
    name: str | None = None,
) -> KernelSource:
    """`builder`'s kernel, built, with a header naming the aten nodes it covers (named `name`: a second
    stage bears its first's name)."""
    kernel = builder.kernel
    name = name or kernel_name(kernel)
    builder.build()
    covers = tuple(_describe(n) for n in kernel.computed)
    what = f"{kind} kernel" if kind != "pointwise" else "kernel"
    header = "\n".join(
        [
            f"# {name}: {what} with {len(kernel.members)} output(s) over shape {list(kernel.shape)}, "
            f"{'int64' if builder.int64 else 'int32'} indexing",
            "# covers:",
            *(f"#   {line}" for line in covers),
        ]
    )
    params = builder.ordered_params()
    return KernelSource(
        name=name,
        params=tuple((p, builder.params[p]) for p in params),
        covers=covers,
        flat_inputs=tuple(builder.flat_inputs),
        header=header,
        signature=(*params, *(f"{block}: tl.constexpr" for block in builder.BLOCKS)),
        statements=tuple(builder.statements),
        kind=kind,
        contiguous_rows=contiguous_rows,
        row_inputs=row_inputs,
        row_outputs=row_outputs,
        int64=builder.int64,
    )
