"""Code generation over a plan: each kernel's variants, or why it has none.

`generate` writes one kernel's variants. `Generated` holds them for every kernel of a plan, for the
passes after partitioning (horizontal grouping, in-place folding, building the steps) to read.
`plan_and_generate` partitions a graph and generates its kernels, partitioning again where a kernel
turned out to read one of its reductions at another row.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import fx

from fuser.emit.codegen import KernelSource, PointwiseBuilder, kernel_name, package
from fuser.emit.row_codegen import RowBuilder, contiguous_rows, splittable, whole_inputs, whole_outputs
from fuser.lower.shapes import free_symbols
from fuser.options import Options
from fuser.plan.partition import Kernel, Plan, partition
from fuser.validate import validation


def generate(kernel: Kernel) -> list[KernelSource]:
    """The kernel's variants: one for a pointwise kernel; persistent and looped for a row kernel, and the
    two stages of a split reduction where one can compute it."""
    if kernel.space is None:
        return [package(PointwiseBuilder(kernel), "pointwise")]
    inner, whole = contiguous_rows(kernel), (whole_inputs(kernel), whole_outputs(kernel))
    if kernel.column_sums is not None:
        # Its rows walked in groups, summing the columns too; then the column kernel adds the groups' sums.
        adds = RowBuilder(kernel.column_sums, True, "split_combine", first_output=len(kernel.row_members))
        return [
            package(RowBuilder(kernel, True, "row_groups"), "row_groups", inner, *whole),
            package(adds, "split_combine", name=kernel_name(kernel)),
        ]
    variants = [
        package(RowBuilder(kernel, persistent), kind, inner, *whole)
        for persistent, kind in ((True, "persistent"), (False, "looped"))
    ]
    if splittable(kernel):
        variants += [
            package(RowBuilder(kernel, False, stage), stage, inner, *whole)
            for stage in ("split_partials", "split_combine")
        ]
    return variants


def kernel_symbols(kernel: Kernel) -> set:
    """Every size symbol the kernel's shapes and strides mention (they must be bound at launch)."""
    symbols = set()
    for node in (*kernel.computed, *kernel.leaves):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            for size in (*value.shape, *value.stride()):
                symbols |= free_symbols(size)
    return symbols


class Generated:
    """For each kernel of a plan: its variants, or the exception its generation raised. A kernel whose
    sizes use symbols no graph input binds was never generated and has neither. Kernels are held, not
    only their ids, so an id is never reused by another kernel while the table lives."""

    def __init__(self) -> None:
        self._made: dict[int, tuple[Kernel, list[KernelSource] | Exception]] = {}

    def add(self, kernel: Kernel, make: Callable[[Kernel], list[KernelSource]]) -> None:
        """Generate `kernel` with `make`, keeping the exception if it raises."""
        try:
            self.record(kernel, make(kernel))
        except Exception as error:
            self.record(kernel, error)

    def record(self, kernel: Kernel, made: list[KernelSource] | Exception) -> None:
        self._made[id(kernel)] = (kernel, made)

    def variants(self, kernel: Kernel) -> list[KernelSource] | None:
        made = self._made.get(id(kernel), (None, None))[1]
        return made if isinstance(made, list) else None

    def error(self, kernel: Kernel) -> Exception | None:
        made = self._made.get(id(kernel), (None, None))[1]
        return made if isinstance(made, Exception) else None

    def pointwise(self, kernel: Kernel) -> KernelSource | None:
        """The kernel's one source if it generated as a pointwise kernel, else None."""
        variants = self.variants(kernel)
        return variants[0] if variants and len(variants) == 1 and variants[0].kind == "pointwise" else None


def plan_and_generate(graph: fx.Graph, options: Options, bound: set) -> tuple[Plan, Generated]:
    """Partition `graph` and generate each kernel whose sizes `bound` symbols cover (the partition has
    decided which reductions go through memory: a failure to generate is recorded, and its kernel runs
    eagerly)."""
    gate = None if options.unvalidated == "fuse" else validation.node_obstacle
    plan = partition(graph, fuse=options.fuse, gate=gate)
    generated = Generated()
    for step in plan.steps:
        if isinstance(step, Kernel) and kernel_symbols(step) <= bound:
            generated.add(step, generate)
    return plan, generated
