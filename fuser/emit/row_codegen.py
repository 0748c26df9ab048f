"""Write a row kernel: reductions fused with their producers (prologue) and their consumers (epilogue).

A row kernel iterates over `rows` (the kept dims of its space, row-major) and `cols` (the reduced
dims, row-major) in blocks of XBLOCK × RBLOCK. Every reduction is a phase: it combines its input over
the columns into one value per row ([XBLOCK, 1]), which later phases and the epilogue read broadcast
over the row. Two variants come from the same kernel:

- persistent: one block covers a whole row, so every input is loaded once and every phase reuses it;
- looped: each phase loops over the row in RBLOCK chunks (long rows), re-reading its inputs.

Values of a row (level 1) outlive a loop; values of an element (level 2) live inside one.
"""

from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager

import torch
from torch import fx

from fuser.emit import ir
from fuser.emit.codegen import Arg, Builder, unflatten
from fuser.lower.dtypes import arithmetic_dtype, value_dtype
from fuser.lower.nodes import bind_arguments, meta
from fuser.lower.ops import POINTWISE_BY_OVERLOAD
from fuser.lower.reductions import KINDS, is_reduction, kind_of, reduction_input, space_of
from fuser.lower.shapes import same, same_shape
from fuser.lower.views import Index
from fuser.plan import row_reads
from fuser.plan.partition import Kernel
from fuser.testing import miscompiles

# The flat column number of every lane, for argmax/argmin.
COL_INDEX = ir.Assign("col_index", ir.over("tl.broadcast_to(cols, [XBLOCK, RBLOCK]).to(tl.int64)", "cols"), 2)

INT_LIMITS = {
    torch.bool: (0, 1),
    torch.int32: (-(2**31), 2**31 - 1),
    torch.int64: (-(2**63), 2**63 - 1),
    torch.int16: (-(2**15), 2**15 - 1),
    torch.int8: (-128, 127),
    torch.uint8: (0, 255),
}


def softmax_total(maximum: fx.Node, kernel: Kernel) -> fx.Node | None:
    """The kernel's sum over the rows of exp(x - maximum), where `maximum` is a row max of x kept as a dim
    and every value is float32 (a softmax's or a cross-entropy's; a half softmax's decomposition computes
    in float32 too): the looped variant computes the two in one pass (`RowBuilder.online_softmax`). Its
    running sums are float32, so a float64 row keeps two passes."""
    source = reduction_input(maximum)
    if kind_of(maximum).name != "max" or meta(maximum).dim() != meta(source).dim():
        return None  # not a max, or one without its dims kept (a softmax's keeps them)
    computed = set(kernel.computed)
    for total in kernel.computed:
        if (
            not is_reduction(total)
            or kind_of(total).name != "sum"
            or not space_of(total).same_as(kernel.space)
        ):
            continue
        exp = reduction_input(total)
        difference = exp.args[0] if exp.target is torch.ops.aten.exp.default else None
        if (
            exp in computed
            and isinstance(difference, fx.Node)
            and difference in computed
            and difference.target is torch.ops.aten.sub.Tensor
            and difference.args[:2] == (source, maximum)
            and bind_arguments(difference)["alpha"] == 1
            and all(meta(n).dtype == torch.float32 for n in (source, maximum, difference, exp, total))
        ):
            return total
    return None


def splittable(kernel: Kernel) -> bool:
    """Whether a split reduction can compute the kernel: only row outputs, reductions whose partial
    results combine with the same combine, and no reduction that reads another's result."""
    space = kernel.space
    reductions = [n for n in kernel.computed if is_reduction(n)]
    if any(not is_reduction(m) and same_shape(meta(m).shape, space.shape) for m in kernel.members):
        return False
    if not all(kind_of(r).splittable for r in reductions):
        return False
    computed = set(kernel.computed)
    for reduction in reductions:
        stack, seen = [reduction_input(reduction)], set()
        while stack:
            node = stack.pop()
            if node in seen or node not in computed:
                continue
            if is_reduction(node):
                return False
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return True


class ReadAtAnotherRow(NotImplementedError):
    """A kernel reads a reduction it computes at another row than the one it is reducing (a view such
    as a slice or a flip of the reduced values). The partitioner stores such a reduction by its own kernel
    (`fuser.plan.row_reads`), so this is a disagreement between the two: a bug."""

    def __init__(self, node: fx.Node, index: Index):
        super().__init__(f"{node.name} is read at {index}, not at its own row")
        self.node = node


def _unmasked(statement: ir.Statement) -> ir.Statement:
    """`statement` in a whole chunk of columns: a reduction's input taken as it is, where its masked lanes
    would hold the identity (no lane is past the row's end; rows past the last are never stored)."""
    if (
        isinstance(statement, ir.Assign)
        and isinstance(statement.expr, ir.Where)
        and statement.expr.condition == "mask"
    ):
        return dataclasses.replace(statement, expr=statement.expr.value)
    return statement


class RowBuilder(Builder):
    BLOCKS = ("XBLOCK", "RBLOCK")  # its block sizes: rows and columns a program covers at a time

    def __init__(self, kernel: Kernel, persistent: bool, stage: str | None = None, first_output: int = 0):
        super().__init__(kernel)
        self.space = kernel.space
        self.full = row_reads.full_index(kernel.space)  # an element's index: r{d} kept, c{d} reduced
        # None, "split_partials" or "split_combine" (a split reduction's stages), or "row_groups": each
        # program walks a group of whole rows and sums the kernel's column sums over them (their kernel's
        # "split_combine" adds the groups' sums).
        self.stage = stage
        self.persistent = persistent or stage in ("split_combine", "row_groups")
        self.first_output = first_output  # the position of this builder's first member among the kernel's
        self.before_rows: list[ir.Statement] = []  # row_groups: the column sums' start and end
        self.after_rows: list[ir.Statement] = []
        self.partials: dict[fx.Node, str] = {}
        # Row reductions already emitted, by (kind, input, dtype): layer_norm's mean and its variance's
        # mean are one sum. Not shared across a split's stages, whose reductions are per node.
        self.reduced: dict[tuple[str, fx.Node, torch.dtype], ir.Expr] = {}
        self.levels.update({"rows": 1, "row_mask": 1, "cols": 2, "col_index": 2, "mask": 2})
        self.levels.update({f"r{d}": 1 for d in self.space.kept})
        self.levels.update({f"c{d}": 2 for d in self.space.reduced})

    # --- indices ---
    def full_index(self) -> Index:
        return self.full

    def row_index(self, shape) -> Index:
        return row_reads.row_index(self.space, shape, self.full)

    def _is_flat(self, node: fx.Node, index: Index, strides) -> bool:
        return False  # a row kernel has no flat offset: it addresses every tensor through its index

    def _unflatten(self, flat: str, dims: tuple[int, ...], prefix: str, level: int) -> list[ir.Assign]:
        return unflatten(flat, dims, self.space.shape, prefix, level)

    def mask_for(self, level: int) -> str | None:
        return {0: None, 1: "row_mask"}.get(level, "mask")

    def eviction(self, level: int) -> str | None:
        # A persistent kernel reads each element of its rows once, yet asking L2 to keep those lines
        # (evict_last) measured faster on the H100: add + layer_norm 1.009x -> 1.000-1.002x the default
        # backend, where evict_first made it 1.03-1.04x (docs/gpu-runs.md, benchmarks/add_ln_variants.py).
        return "evict_last" if self.persistent and level == 2 else None

    @contextmanager
    def columns(self, peeled: bool = False):
        """A phase over the columns: a loop in the looped variant; level-2 values die with it. `peeled`:
        the whole chunks first, their column mask and the reductions' masked-lane selects left out, then
        the last partial chunk as it was (a select a logit fewer in online softmax's loop: issue 29)."""
        if self.persistent:
            yield
            return
        outer, self.body = self.body, []
        yield
        inner, self.body = self.body, outer
        # Values of a row (level <= 1) computed while emitting the loop do not depend on the columns:
        # they go before the loop, where every later phase can read them.
        hoisted = [s for s in inner if isinstance(s, ir.Assign) and s.level <= 1]
        self.body += hoisted
        inner = [s for s in inner if s not in hoisted]
        first, end = ("split_start", "split_end") if self.stage == "split_partials" else ("0", "num_cols")
        bound = miscompiles.rewrite("loop_mask", end, builder=self, end=end)
        cols = ir.Assign("cols", ir.over("col_start + tl.arange(0, RBLOCK)[None, :]", "col_start"), 2)
        mask = ir.Assign("mask", ir.over(f"row_mask & (cols < {bound})", "row_mask", "cols", end), 2)
        index = ir.live([*self._unflatten("cols", self.space.reduced, "c", 2), COL_INDEX], inner)
        start = ir.over(first, first)
        if peeled:
            whole = self.fresh("whole_cols")
            chunks = f"{end} // RBLOCK" if first == "0" else f"{first} + ({end} - {first}) // RBLOCK"
            self.body.append(ir.Assign(whole, ir.over(f"{chunks} * RBLOCK", first, end), 0))
            row_mask_only = ir.Assign("mask", ir.name("row_mask"), 2)
            unmasked = (cols, row_mask_only, *index, *map(_unmasked, inner))
            self.body.append(ir.Loop("col_start", start, ir.name(whole), "RBLOCK", unmasked))
            start = ir.name(whole)
        self.body.append(ir.Loop("col_start", start, ir.name(end), "RBLOCK", (cols, mask, *index, *inner)))
        self.values = {k: v for k, v in self.values.items() if self.level(v[0]) < 2}

    # --- reductions ---
    def reduction(self, node: fx.Node, index: Index) -> tuple[ir.Expr, torch.dtype]:
        if not space_of(node).same_as(self.space):
            raise NotImplementedError(f"{node.name} reduces in another space than its kernel")
        if index != self.row_index(meta(node).shape):
            raise ReadAtAnotherRow(node, index)
        kind = kind_of(node)
        out = meta(node)
        source = reduction_input(node)
        if kind.emitter is not None:
            return getattr(self, kind.emitter)(node, source, kind.name)
        accumulate = kind.accumulates(out.dtype)
        self.current = node
        total = softmax_total(node, self.kernel) if not self.persistent and self.stage is None else None
        if total is not None:
            result = self.online_softmax(source, total)
        else:
            result = self.reduce(kind.name, source, accumulate)
        if self.stage == "split_partials":
            # Split s's partial result of row r at s * num_rows + r.
            at = ir.Address(
                self._partials(node, accumulate), (("tl.program_id(1)", "num_rows"), ("rows", None))
            )
            self.body.append(ir.Effect(ir.Store(at, result, "row_mask")))
        held = value_dtype(out.dtype)
        made = self.made(self.cast(result, accumulate, arithmetic_dtype(out.dtype)), out.dtype)
        return (self.emit(kind.name, made, held) if made != result else result), held

    def _identity(self, kind: str, dtype: torch.dtype) -> ir.Accumulator:
        combine = KINDS[kind].combine
        if dtype.is_floating_point:
            identity = miscompiles.rewrite("reduction_identity", combine.identity, kind=kind)
        else:
            low, high = INT_LIMITS[dtype]
            identity = {"min": low, "max": high}.get(combine.int_identity, combine.int_identity)
        return ir.Accumulator(identity, dtype)

    def _partials(self, reduction: fx.Node, dtype: torch.dtype) -> str:
        if reduction not in self.partials:
            self.partials[reduction] = f"partials{len(self.partials)}"
            self.params[f"{self.partials[reduction]}_ptr"] = Arg(
                "partials", index=len(self.partials) - 1, dtype=dtype
            )
        return f"{self.partials[reduction]}_ptr"

    def _input(self, source: fx.Node, dtype: torch.dtype, kind: str) -> ir.Expr:
        """The reduction's input at the current columns, cast to `dtype`, masked lanes set to identity."""
        if self.stage == "split_combine":
            # The columns are the splits: read the partial results the first stage wrote.
            at = ir.Address(self._partials(self.current, dtype), (("cols", "num_rows"), ("rows", None)))
            loaded = self.emit("partial", ir.Load(at, "mask", dtype), dtype)
            return self._masked(loaded, self._identity(kind, dtype))
        name, held = self.value(source, self.full_index())
        truth = KINDS[kind].reads_truth
        value = self.cast(name, held, torch.bool) if truth else name
        value = self.cast(value, torch.bool if truth else held, dtype)
        return self._masked(value, self._identity(kind, dtype))

    def _masked(self, value: ir.Expr, identity: ir.Accumulator) -> ir.Expr:
        """`value` where the lane is in bounds, else the reduction's identity."""
        return self.emit("masked", ir.Where("mask", value, identity), identity.dtype)

    def reduce(self, kind: str, source: fx.Node, dtype: torch.dtype) -> ir.Expr:
        if self.stage is not None:
            return self._reduce(kind, source, dtype)
        key = (kind, source, dtype)
        if key not in self.reduced:
            self.reduced[key] = self._reduce(kind, source, dtype)
        return self.reduced[key]

    def _reduce(self, kind: str, source: fx.Node, dtype: torch.dtype) -> ir.Expr:
        rule = KINDS[kind].combine
        combine, finish = rule.combine, rule.finish
        if not dtype.is_floating_point:
            combine, finish = rule.int_combine or combine, rule.int_finish or finish
        if self.persistent:
            with self.columns():
                block = self._input(source, dtype, kind)
            return self._row(kind, ir.Reduce(block, 1, finish), dtype)
        accumulator = self.emit("acc", self._identity(kind, dtype), dtype)
        with self.columns():
            block = self._input(source, dtype, kind)
            step = ir.over(combine.format(a=accumulator, b=block), accumulator, block)
            self.body.append(ir.Update((accumulator.text,), step))
        return self._row(kind, ir.Reduce(accumulator, 1, finish), dtype)

    def online_softmax(self, source: fx.Node, total: fx.Node) -> ir.Expr:
        """The row max of `source` and `total`, the row sum of exp(source - that max), in one pass over a
        looped row, not two: each chunk of the row is reduced to its max and its sum of exp relative to the
        larger of that and the max so far, which the sum so far is rescaled to (one exp per element, and
        one per row and chunk). A cross-entropy over 32,000 classes read its logits twice for these two
        (issue 29). As in eager: nan where the row holds nan or +inf, and where every element is -inf
        (exp(-inf - -inf))."""
        exp = POINTWISE_BY_OVERLOAD[torch.ops.aten.exp.default].render
        f32, row = torch.float32, ("XBLOCK", "1")
        running_max = self.emit("running_max", ir.Accumulator("-float('inf')", f32, row), f32)
        running_sum = self.emit("running_sum", ir.Accumulator(0, f32, row), f32)
        with self.columns(peeled=True):
            # Made with `emit`, not `_row`: a chunk's values are per row but live in the loop.
            x = self._input(source, f32, "max")
            finish = ir.Reduce(x, 1, KINDS["max"].combine.finish)
            grown = self.emit(
                "grown", ir.over(f"lib.maximum_nan({running_max}, {finish})", running_max, x), f32
            )
            unmoved = ir.over(f"{running_max} == {grown}", running_max, grown)
            moved = ir.over(exp(f"{running_max} - {grown}"), running_max, grown)
            rescale = self.emit("rescale", ir.Where(unmoved, ir.Expr("1.0"), moved), f32)
            # A chunk whose max is -inf holds only -inf: its terms are exp(-inf - 0) = 0, not nan, with
            # one select a row rather than one a logit.
            empty = ir.over(f"{grown} == -float('inf')", grown)
            shift = self.emit("shift", ir.Where(empty, ir.Expr("0.0"), grown), f32)
            # The terms' exp is the GPU's fast one (`ex2.approx` of the difference times log2 e, as the
            # default backend's): the accurate libdevice one made the column loop bound by instructions
            # (about 21 a logit, 7 of them exp's), and a term's error of a few ulps is below what the sum
            # of the row's terms rounds. The interpreter computes both with NumPy's exp.
            term = self.emit("term", ir.over(f"tl.exp({x} - {shift})", x, shift), f32)
            total_term = ir.Reduce(term, 1, "lib.add")
            step = ir.over(
                f"{running_sum} * {rescale} + {total_term}, {grown}", running_sum, rescale, total_term, grown
            )
            self.body.append(ir.Update((running_sum.text, running_max.text), step))
        row_max = self._row("max", running_max, f32)
        no_max = ir.Where(
            ir.over(f"{row_max} == -float('inf')", row_max), ir.Expr("float('nan')"), running_sum
        )
        self.reduced[("sum", reduction_input(total), f32)] = self._row("sum", no_max, f32)
        return row_max

    def _row(self, stem: str, expr: ir.Expr, dtype: torch.dtype | None = None) -> ir.Expr:
        """A value per row: a reduction over the columns, whatever the level of what it reads."""
        name = self.fresh(stem)
        self.body.append(ir.Assign(name, expr, 1, dtype))
        self.levels[name] = 1
        return ir.name(name)

    def arg_reduction(self, node: fx.Node, source: fx.Node, kind: str) -> tuple[ir.Expr, torch.dtype]:
        combine = f"lib.{kind}_combine"
        dtype = arithmetic_dtype(meta(source).dtype)
        identity = self._identity("max" if kind == "argmax" else "min", dtype)

        def block() -> tuple[ir.Expr, ir.Expr]:
            name, held = self.value(source, self.full_index())
            return self._masked(self.cast(name, held, dtype), identity), ir.name("col_index")

        if self.persistent:
            with self.columns():
                values, indices = block()
                pair = self._row("pair", ir.Reduce((values, indices), 1, combine, keep=False))
        else:
            best = self.emit("best", identity, dtype)
            best_index = self.emit("best_index", ir.Accumulator(0, torch.int64), torch.int64)
            with self.columns():
                values, indices = block()
                step = f"{combine}({best}, {best_index}, {values}, {indices})"
                self.body.append(
                    ir.Update((best.text, best_index.text), ir.over(step, best, best_index, values, indices))
                )
            pair = self._row("pair", ir.Reduce((best, best_index), 1, combine, keep=False))
        return self._row(kind, ir.over(f"{pair}[1][:, None]", pair), torch.int64), torch.int64

    def variance(self, node: fx.Node, source: fx.Node, kind: str) -> tuple[ir.Expr, torch.dtype]:
        # Two passes (never E[x^2] - E[x]^2): the mean, then the sum of squared deviations from it. The
        # mean is taken relative to the row's first value (K + sum(x - K) / n), so a row of equal values
        # has exactly the mean of its values and a variance of exactly 0, as eager's Welford gives: a
        # mean off by one rounding made std's gradient there 1 / (2 * 1e-7) times that rounding, not 0.
        dtype = value_dtype(meta(node).dtype)
        correction = bind_arguments(node)["correction"]
        correction = 1.0 if correction is None else float(correction)
        shift = ir.Expr("0.0")
        if not any(same(self.space.shape[d], 0) for d in self.space.reduced):  # no first value to read
            shift = self.cast(*self.value(source, self.row_index(self.space.shape)), dtype)
        offsets = self._row_sum("offsets", source, dtype, lambda x: ir.over(f"{x} - {shift}", x, shift))
        mean = self._row(
            "mean", ir.over(f"{shift} + {offsets} / num_cols", shift, offsets, "num_cols"), dtype
        )
        squares = self._row_sum(
            "squares", source, dtype, lambda x: ir.over(f"({x} - {mean}) * ({x} - {mean})", x, mean)
        )
        variance = ir.over(f"{squares} / tl.maximum(num_cols - {correction!r}, 0.0)", squares, "num_cols")
        return self._row("var", self.made(variance, meta(node).dtype), dtype), dtype

    def _row_sum(self, stem: str, source: fx.Node, dtype: torch.dtype, term) -> ir.Expr:
        """The sum over the row's columns of `term(x)`, x being the source's value held in `dtype`."""
        if self.persistent:
            with self.columns():
                terms = self._terms(source, dtype, term)
                return self._row(stem, ir.Reduce(terms, 1, "lib.add"), dtype)
        accumulator = self.emit("acc", ir.Accumulator(0, dtype), dtype)
        with self.columns():
            terms = self._terms(source, dtype, term)
            step = ir.over(f"{accumulator} + {terms}", accumulator, terms)
            self.body.append(ir.Update((accumulator.text,), step))
        return self._row(stem, ir.Reduce(accumulator, 1, "lib.add"), dtype)

    def _terms(self, source: fx.Node, dtype: torch.dtype, term) -> ir.Expr:
        name, held = self.value(source, self.full_index())
        value = term(self.cast(name, held, dtype))
        return self.emit("term", ir.Where("mask", value, ir.Expr("0.0")), dtype)

    # --- the kernel ---
    def build(self) -> None:
        sums = set(self.kernel.column_sums.computed) if self.kernel.column_sums else set()
        for node in self.kernel.computed:
            if is_reduction(node) and node not in sums:  # a column sum is added up by `column_sums`
                self.value(node, self.row_index(meta(node).shape))
        if self.stage == "split_partials":  # the first stage stores partial results only
            self._assemble()
            return
        full = []
        for position, member in enumerate(self.kernel.row_members, self.first_output):
            shape = meta(member).shape
            if not is_reduction(member) and same_shape(shape, self.space.shape):
                full.append((position, member))
                continue
            self.store(position, member, self.row_index(shape))
        start = len(self.body)
        if full:
            with self.columns():
                for position, member in full:
                    self.store(position, member, self.full_index())
        if self.stage == "row_groups":
            self.column_sums()
        if full:  # a testing-only hook (fuser.testing.miscompiles): a no-op by default
            self.body = miscompiles.rewrite("epilogue", self.body, start=start, space=self.space)
        self._assemble()

    def column_sums(self) -> None:
        """Each column sum of the kernel (`Kernel.column_sums`), over the rows of this program's group: added
        up block by block of rows, and stored as the group's partial sum at (group, column), where the
        column kernel's "split_combine" stage reads a split's (`_input`), numbered in the same order."""
        sums = self.kernel.column_sums
        for number, reduction in enumerate(n for n in sums.computed if is_reduction(n)):
            dtype = kind_of(reduction).accumulates(meta(reduction).dtype)
            value, held = self.value(reduction_input(reduction), self.full_index())
            value = self.cast(value, held, dtype)
            total = f"column_sum{number}"
            self.before_rows.append(ir.Assign(total, ir.Accumulator(0, dtype, ("1", "RBLOCK")), 0, dtype))
            rows = ir.Reduce(ir.Where("mask", value, ir.Expr("0")), 0, "lib.add")
            self.body.append(ir.Update((total,), ir.over(f"{total} + {rows}", total, rows)))
            pointer = f"partials{number}_ptr"
            self.params[pointer] = Arg("partials", index=number, dtype=dtype)
            at = ir.Address(pointer, (("pid", "num_cols"), ("cols", None)))
            self.after_rows.append(ir.Effect(ir.Store(at, ir.name(total), "col_mask")))

    def store(self, position: int, member: fx.Node, index: Index) -> None:
        """Store `member` at `index`, masked by the row mask or, for a value per element, the full mask.

        Triton stores through a block of addresses at least as large as the value and its mask. An
        index naming no row or column (a 0-d or all-size-1 space) gives one scalar address: zero terms
        widen it to a block, and the mask leaves only the first lane to store."""
        index = miscompiles.rewrite("store_index", index, builder=self, node=member)  # testing only
        value, held = self.value(member, index)
        address = self.output_address(position, member, index)
        level = max(1, self.level(value), self.level(address))
        widen = [name for name, at in (("rows", 1), ("cols", 2)) if self.level(address) < at <= level]
        stored = self.cast(value, held, meta(member).dtype)
        self.body.append(ir.Effect(ir.Store(address.widened(*widen), stored, self.mask_for(level))))

    def _assemble(self) -> None:
        if self.stage == "row_groups":
            self._assemble_row_groups()
            return
        start = "pid.to(tl.int64) * XBLOCK" if self.int64 else "pid * XBLOCK"
        prologue = [
            ir.Assign("pid", ir.Expr("tl.program_id(0)"), 0),
            ir.Assign("rows", ir.over(f"{start} + tl.arange(0, XBLOCK)[:, None]", "pid"), 1),
            ir.Assign("row_mask", ir.over("rows < num_rows", "rows", "num_rows"), 1),
        ]
        if self.stage == "split_partials":
            prologue += [
                ir.Assign("split_start", ir.over("tl.program_id(1) * split_size", "split_size"), 0),
                ir.Assign(
                    "split_end",
                    ir.over(
                        "tl.minimum(split_start + split_size, num_cols)",
                        "split_start",
                        "split_size",
                        "num_cols",
                    ),
                    0,
                ),
            ]
            self.int_param("split_size", 0)  # set per launch
        if self.persistent:
            ends = "num_splits" if self.stage == "split_combine" else "num_cols"
            prologue += [
                ir.Assign("cols", ir.Expr("tl.arange(0, RBLOCK)[None, :]"), 2),
                ir.Assign("mask", ir.over(f"row_mask & (cols < {ends})", "row_mask", "cols", ends), 2),
            ]
            prologue += ir.live([*self._unflatten("cols", self.space.reduced, "c", 2), COL_INDEX], self.body)
        prologue += ir.live(self._unflatten("rows", self.space.kept, "r", 1), self.body + prologue)
        self._size_params(prologue + self.body)
        if self.stage == "split_combine":
            self.int_param("num_splits", 0)  # set per launch
        self.statements = prologue + self.body

    def _size_params(self, statements: list[ir.Statement]) -> None:
        read = ir.reads(statements)
        for d, size in enumerate(self.space.shape):
            if f"size{d}" in read:
                self.int_param(f"size{d}", size)
        rows, cols = 1, 1
        for d, size in enumerate(self.space.shape):
            if d in self.space.reduced:
                cols = cols * size
            else:
                rows = rows * size
        self.int_param("num_rows", rows)
        self.int_param("num_cols", cols)

    def _assemble_row_groups(self) -> None:
        """Program `pid` walks row blocks pid, pid + num_groups, ... (whole rows each), computing and
        storing the kernel's row values as a persistent kernel does, and sums its column sums over them."""
        block = "block.to(tl.int64)" if self.int64 else "block"
        rows = [
            ir.Assign("rows", ir.over(f"{block} * XBLOCK + tl.arange(0, XBLOCK)[:, None]", "block"), 1),
            ir.Assign("row_mask", ir.over("rows < num_rows", "rows", "num_rows"), 1),
            ir.Assign("mask", ir.over("row_mask & col_mask", "row_mask", "col_mask"), 2),
        ]
        indices = [
            *self._unflatten("cols", self.space.reduced, "c", 2),
            COL_INDEX,
            *self._unflatten("rows", self.space.kept, "r", 1),
        ]
        walk = ir.Loop(
            "block",
            ir.name("pid"),
            ir.over("(num_rows + XBLOCK - 1) // XBLOCK", "num_rows"),
            "num_groups",
            (*rows, *ir.live(indices, self.body + rows), *self.body),
        )
        prologue = [
            ir.Assign("pid", ir.Expr("tl.program_id(0)"), 0),
            ir.Assign("cols", ir.Expr("tl.arange(0, RBLOCK)[None, :]"), 2),
            ir.Assign("col_mask", ir.over("cols < num_cols", "cols", "num_cols"), 2),
            *self.before_rows,
        ]
        self.statements = [*prologue, walk, *self.after_rows]
        self._size_params(self.statements)
        self.int_param("num_groups", 0)  # set per launch


def whole_inputs(kernel: Kernel) -> int:
    """How many of the kernel's inputs are as large as its space: read at every row and column, they are
    its load on memory (the launch picks warps by it)."""
    return _as_large_as_space(kernel, kernel.leaves)


def whole_outputs(kernel: Kernel) -> int:
    """How many of the values it stores are as large as its space (the launch picks a looped kernel's
    columns per iteration by whether it writes rows)."""
    return _as_large_as_space(kernel, kernel.members)


def _as_large_as_space(kernel: Kernel, nodes: list) -> int:
    space_numel = math.prod(kernel.space.shape)
    return sum(
        1
        for node in nodes
        if isinstance(value := node.meta.get("val"), torch.Tensor) and same(value.numel(), space_numel)
    )


def contiguous_rows(kernel: Kernel) -> bool:
    """Whether the reduced dims are innermost in memory for the kernel's full-shape inputs."""
    space = kernel.space
    for leaf in kernel.leaves:
        value = leaf.meta.get("val")
        if isinstance(value, torch.Tensor) and value.dim() == len(space.shape) and value.dim() > 0:
            reduced = [value.stride(d) for d in space.reduced if not same(space.shape[d], 1)]
            kept = [value.stride(d) for d in space.kept if not same(space.shape[d], 1)]
            return not reduced or not kept or min(reduced) <= min(kept)
    return True
