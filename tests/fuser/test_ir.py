"""The kernel body's statements (fuser/emit/ir.py): what they read, which index lines stay live, how they print."""

from __future__ import annotations

import pytest
import torch

from fuser.emit import generation, ir
from fuser.explain import explain


def test_an_expression_reads_the_names_and_expressions_it_was_made_from():
    load = ir.over("tl.load(in0_ptr + i0 * in0_stride0, mask=mask)", "in0_ptr", "i0", "in0_stride0", "mask")
    cast = ir.over(f"({load}).to(tl.float32)", load)
    assert cast.reads == {"in0_ptr", "i0", "in0_stride0", "mask"}
    assert ir.over("r0 * s0 + 0", "r0", "0").reads == {"r0"}  # an index's "0" is the literal zero
    assert ir.name("x0").atomic and not cast.atomic


def test_only_index_lines_that_something_reads_stay_transitively():
    i1 = ir.Assign("i1", ir.over("offset % size1", "offset", "size1"), 2)
    rest = ir.Assign("irest1", ir.over("offset // size1", "offset", "size1"), 2)
    i0 = ir.Assign("i0", ir.name("irest1"), 2)
    store = ir.Effect(ir.over("tl.store(out0_ptr + i0 * s0, x0, mask=mask)", "out0_ptr", "i0", "s0", "x0"))
    assert ir.live([i1, rest, i0], [store]) == [rest, i0]


def test_a_loop_prints_its_body_indented_and_reads_what_its_body_reads():
    acc = ir.Update(("acc0",), ir.over("acc0 + masked0", "acc0", "masked0"))
    loop = ir.Loop("col_start", ir.Expr("0"), ir.name("num_cols"), "RBLOCK", (acc,))
    assert ir.lines([loop]) == ["for col_start in range(0, num_cols, RBLOCK):", "    acc0 = acc0 + masked0"]
    assert loop.reads == {"acc0", "masked0", "num_cols"}


@pytest.fixture
def generated(monkeypatch) -> list:
    """Every kernel variant code generation makes while the test runs (fingerprint probes, where the
    cache is cold, generate kernels of their own: pick kernels by name)."""
    variants = []
    generate = generation.generate

    def recording(kernel):
        made = generate(kernel)
        variants.extend(made)
        return made

    monkeypatch.setattr(generation, "generate", recording)
    return variants


def test_a_looped_kernel_hoists_row_values_out_of_its_column_loop(generated):
    # x - mean(x): the loop summing the row, then the one storing x - mean, hold only values per element.
    explain(lambda x: x - x.mean(-1, keepdim=True), torch.randn(4, 9))
    (looped,) = [v for v in generated if v.kind == "looped" and v.name == "fused_sum_prims_div_sub"]
    loops = [s for s in looped.statements if isinstance(s, ir.Loop)]
    assert len(loops) == 2
    for loop in loops:
        assert not [s for s in loop.body if isinstance(s, ir.Assign) and s.level <= 1]
    # The mean is emitted while the epilogue's loop is written (its subtraction reads it) and hoisted
    # before that loop.
    top = [s.target for s in looped.statements if isinstance(s, ir.Assign)]
    assert "prims_div0" in top


def test_accesses_casts_and_constants_are_nodes_that_print_as_triton():
    at = ir.Address("in0_ptr", (("i0", "in0_stride0"), ("i1", "in0_stride1")))
    load = ir.Load(at, "mask", torch.bfloat16, "evict_last")
    assert (
        str(load)
        == "tl.load(in0_ptr + i0 * in0_stride0 + i1 * in0_stride1, mask=mask, eviction_policy='evict_last')"
    )
    assert load.reads == {"in0_ptr", "i0", "in0_stride0", "i1", "in0_stride1", "mask"}
    widened = ir.Cast(load, torch.bfloat16, torch.float32)
    assert str(widened).startswith("lib.widen_bf16(tl.load(") and widened.reads == load.reads
    assert str(ir.Cast(ir.name("x0"), torch.float32, torch.bool)) == "(x0 != 0)"
    assert str(ir.Cast(ir.over("a + b", "a", "b"), torch.int32, torch.float32)) == "(a + b).to(tl.float32)"
    scalar = ir.Address("out0_ptr").widened("offset")  # one element, as a block
    store = ir.Store(scalar, ir.name("x0"), "mask")
    assert str(store) == "tl.store(out0_ptr + offset * 0, x0, mask=mask)" and not scalar.flat
    assert ir.Address("out0_ptr", (("offset", None),)).flat
    assert (
        str(ir.Const(-0.0, torch.float32))
        == "tl.full([], -2147483648, tl.int32).to(tl.float32, bitcast=True)"
    )
    assert str(ir.Const(300, torch.int8)) == "tl.full([], 44, tl.int8)"  # wrapped as eager wraps it


def test_a_pass_reads_what_a_kernel_loads_and_stores_where_from_its_statements(generated):
    x, y, w = torch.randn(4, 5, dtype=torch.bfloat16), torch.randn(5, 4), torch.randn(5)
    explain(lambda x, y, w: x * y.t() + w, x, y, w)
    (kernel,) = [k for k in generated if k.name == "fused_mul_add"]
    found = ir.accesses(kernel.statements)
    loads = {a.address.pointer: a for a in found if isinstance(a, ir.Load)}
    (store,) = [a for a in found if isinstance(a, ir.Store)]
    # x at the flat offset (contiguous, the kernel's shape), y's transpose through both of its strides,
    # w broadcast along the rows through its one stride; the result stored flat, as float32.
    assert loads["in0_ptr"].address.flat and loads["in0_ptr"].dtype == torch.bfloat16
    assert [stride for _, stride in loads["in1_ptr"].address.terms] == ["in1_stride0", "in1_stride1"]
    assert (
        loads["in2_ptr"].address.terms == (("i1", "in2_stride0"),) and loads["in2_ptr"].dtype == torch.float32
    )
    assert store.address.flat and store.mask == "mask" and store.address.pointer == "out0_ptr"


def test_a_reductions_accumulator_mask_and_finish_are_nodes_that_print_as_triton():
    start = ir.Accumulator("-float('inf')", torch.float32, ("XBLOCK", "1"))
    assert str(start) == "tl.full([XBLOCK, 1], -float('inf'), tl.float32)" and not start.reads
    masked = ir.Where("mask", ir.name("in0_0"), ir.Accumulator(0, torch.int64))
    assert str(masked) == "tl.where(mask, in0_0, tl.full([XBLOCK, RBLOCK], 0, tl.int64))"
    assert masked.reads == {"mask", "in0_0"}
    assert str(ir.Reduce(masked, 0, "lib.add")).endswith(", 0, lib.add)[None, :]")
    pair = ir.Reduce((ir.name("best0"), ir.name("index0")), 1, "lib.argmax_combine", keep=False)
    assert str(pair) == "tl.reduce((best0, index0), 1, lib.argmax_combine)" and pair.reads == {
        "best0",
        "index0",
    }


def test_a_pass_finds_a_softmaxs_accumulators_and_masks_from_its_statements(generated):
    explain(lambda x: torch.softmax(x, -1), torch.randn(4, 9))
    variants = {v.kind: v for v in generated if v.name.startswith("fused_amax_sub_exp")}
    looped, persistent = variants["looped"], variants["persistent"]
    # The looped variant's one pass computes the row max and the sum of exp relative to it.
    found = [(a.target, a.dtype, a.expr.identity, a.expr.shape) for a in ir.accumulators(looped.statements)]
    assert found == [
        ("running_max0", torch.float32, "-float('inf')", ("XBLOCK", "1")),
        ("running_sum0", torch.float32, 0, ("XBLOCK", "1")),
    ]
    assert not ir.accumulators(persistent.statements)  # a whole row reduced at once
    # Masked lanes hold each reduction's identity: the max's, and in the persistent variant the sum's.
    for variant, identities in ((looped, ["-float('inf')"]), (persistent, ["-float('inf')", "0"])):
        masks = [w for w in ir.nodes(variant.statements, ir.Where) if w.condition == "mask"]
        assert [w.other.identity for w in masks] == identities
    assert {r.combine for r in ir.nodes(persistent.statements, ir.Reduce)} == {"lib.maximum_nan", "lib.add"}
    masked = {
        s.target: s.dtype for s in persistent.statements if isinstance(s, ir.Assign) and s.expr in masks
    }
    assert masked == {"masked0": torch.float32, "masked1": torch.float32}
