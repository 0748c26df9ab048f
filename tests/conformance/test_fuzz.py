"""The fuzzer's parts: programs are drawn with the features they must cover and run in eager, a clean
backend passes the `ci` profile, a vacuous pass is rejected, and a repro runs alone and fails the same
way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from conformance.fuzz.check import check
from conformance.fuzz.program import Input, Node, Operand, Positions, Program, View
from conformance.fuzz.repro import write_repro
from conformance.fuzz.strategies import (
    LONG,
    NodeDraw,
    Value,
    _node,
    product_depends_on_order,
    programs,
    reads_elsewhere,
)
from conformance.fuzz.vocab import VOCABULARY
from fuser.testing.miscompiles import ENV, planted

REPO = Path(__file__).resolve().parents[2]


def drawn(count: int) -> list[Program]:
    found = []

    @settings(max_examples=count, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(program):
        if program is not None:
            found.append(program)

    collect()
    return found


def test_drawn_programs_cover_what_the_issue_asks_for():
    features = Counter()
    for program in drawn(300):
        function = program.function()
        function(*program.make_inputs())  # resolution ran every node eagerly: the program runs
        source = program.source()
        shapes = [i.shape for i in program.inputs]
        features["several inputs"] += len(program.inputs) > 1
        features["several outputs"] += len(program.outputs) > 1
        features["a zero-size dim"] += any(0 in s for s in shapes)
        features["a size-1 dim"] += any(1 in s for s in shapes)
        features["a long row"] += any(LONG in s for s in shapes)
        features["mixed dtypes"] += len({i.dtype for i in program.inputs}) > 1
        features["bfloat16"] += "bfloat16" in program.dtypes
        features["an in-place op"] += any(n.op.split(".")[1].endswith("_") for n in program.nodes)
        features["a Python scalar"] += any(o.value is None for n in program.nodes for o in n.operands)
        features["keepdim=True"] += "keepdim=True" in source
        features["keepdim=False"] += "keepdim=False" in source
        features["a shared value"] += any(
            sum(o.value == v for n in program.nodes for o in n.operands) > 1
            for v in range(len(program.inputs) + len(program.nodes))
        )
        features["differentiable"] += program.differentiable
        for kind in ("permute", "transpose", "expand", "reshape", "unsqueeze"):
            features[kind] += f".{kind}(" in source
        features["slice"] += "::" in source
        for layout in ("noncontiguous", "channels_last", "offset", "transposed", "expanded"):
            features[layout] += any(i.layout == layout for i in program.inputs)
    missing = [name for name, count in features.items() if count == 0]
    assert not missing, (missing, features)


def test_an_in_place_update_may_read_its_target_element_for_element_only():
    v = torch.arange(6.0)
    assert not reads_elsewhere(v, v) and not reads_elsewhere(v, v.clone())
    assert reads_elsewhere(v, v[1::2]) and reads_elsewhere(v, v[:1].expand(6))
    assert reads_elsewhere(v.view(2, 3), v.view(3, 2).t())


def test_an_in_place_node_never_reads_its_target_through_another_view():
    # `v.xlogy_(v[1::2])` (one element, broadcast): eager read the updated v[1] for v[2], a compiled
    # program the old one; no one answer (validation's fuzz stage, 2026-11-27; eager rejects a partial
    # overlap it can see, not this one). The same draw without the slice stays in place.
    xlogy = next(op for op in VOCABULARY if op.name == "aten.xlogy.Tensor")
    values = [Value((torch.rand(6) + 0.5)[::2], exact=True)]  # noncontiguous: eager cannot see the overlap

    def node(views):
        draw = NodeDraw(0, (0, 0, 0), views, 1.0, 0, 0, False, inplace=True, output=False, cast=None)
        return _node(xlogy, draw, values, 1)[0]

    assert node(()).op == "aten.xlogy_.Tensor"  # v.xlogy_(v): element for element
    assert node(((1, "slice", 0, 1),)).op == "aten.xlogy.Tensor"  # v[1::2]: out of place instead


def _draw(**changes) -> NodeDraw:
    fields = dict(refs=(0, 1, 2), views=(), scalar=1.0, variant=0, dim=0, keepdim=False, inplace=False)
    return NodeDraw(0, **(fields | changes), output=False, cast=None)


def test_a_product_that_overflows_before_or_after_a_zero_is_not_drawn():
    # prod over a row of 16,411 values up to 12.6 with zeros first: eager on cuda gave nan (a thread's
    # partial overflowed, another's met the zeros), eager on cpu and the fuser -0.0 (validation's fuzz
    # stage on sm_90, 2026-11-27). No order is the right one, so the fuzzer leaves such a node out.
    row = torch.cat([torch.zeros(8), torch.full((200,), 12.0)])
    assert product_depends_on_order(row, {})
    assert product_depends_on_order(torch.stack([row, torch.ones(208)]), {"dim": -1})
    assert not product_depends_on_order(torch.stack([row, torch.ones(208)]), {"dim": 0})  # columns of 2
    assert not product_depends_on_order(row[:20], {})  # 12 ** 12: no order overflows float32
    assert product_depends_on_order(torch.cat([torch.full((60,), 1e-30), torch.full((60,), 1e30)]), {})
    assert not product_depends_on_order(row[8:], {})  # nothing to meet: inf in every order
    assert not product_depends_on_order(torch.cat([row, torch.tensor([torch.nan])]), {})  # nan in every order
    assert not product_depends_on_order(row.double(), {})  # float64's range holds 12 ** 200
    assert not product_depends_on_order(row.long(), {})  # integers wrap the same in every order
    prod = next(op for op in VOCABULARY if op.name == "aten.prod.dim_int")
    assert _node(prod, _draw(), [Value(torch.stack([row, row]), exact=True)], 1) is None
    assert _node(prod, _draw(), [Value(torch.stack([row[:20], row[:20]]), exact=True)], 1) is not None


def test_a_node_takes_only_operand_dtypes_eager_accepts_on_cpu():
    # prims.div's spec lists bool, but eager on cpu rejects it while eager on cuda returns float32 where
    # its own meta says bool: no kernel can match both (docs/design.md, "Numerics"). The fuzzer drew it
    # on cuda only, and flagged the fuser's traced-dtype answer (validation on sm_90, 2026-11-27).
    div = next(op for op in VOCABULARY if op.name == "prims.div.default")
    flags = [Value(torch.tensor([True, False]), exact=True), Value(torch.tensor([False, False]), exact=True)]
    assert _node(div, _draw(), flags, 2) is None
    numbers = [Value(torch.tensor([1.0, 0.0]), exact=True), Value(torch.tensor([2.0, 0.0]), exact=True)]
    assert _node(div, _draw(), numbers, 2) is not None


def test_a_planted_miscompile_is_off_unless_asked_for(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("FUSER_TESTING_WRONG_LOWERING", raising=False)
    assert planted() is None
    monkeypatch.setenv("FUSER_TESTING_WRONG_LOWERING", "aten.mul.Tensor")
    assert planted() == ("wrong_lowering", "aten.mul.Tensor")


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("no_such_kind", "unknown miscompile"),
        ("tail_mask:x", "takes no argument"),
        ("wrong_lowering", "needs"),
    ],
)
def test_a_bad_miscompile_name_is_an_error_naming_it(monkeypatch, value, complaint):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(ValueError, match=complaint):
        planted()


def small_program() -> Program:
    """v2 = v0.t() * v1: a view, a broadcast and a multiply."""
    return Program(
        inputs=(Input((3, 4), "float32", "noncontiguous", True), Input((3,), "float32", "contiguous", False)),
        nodes=(Node("aten.mul.Tensor", (Operand(0, views=(View("transpose", (0, 1)),)), Operand(1))),),
        outputs=(2,),
        dtypes=("float32", "float32", "float32"),
        differentiable=True,
    )


def gather_program() -> Program:
    """v1 = gather(exp(v0), 1, positions the program computes) + v0[:, :2]: a gather of a fused producer."""
    positions = Positions((4, 2), high=6, salt=1, like=0)
    gather = Node(
        "aten.gather.default",
        (Operand(1), Operand(None, positions=positions)),
        keywords=("index",),
        attrs=(("dim", 1),),
    )
    return Program(
        inputs=(Input((4, 6), "float32", "contiguous", False),),
        nodes=(
            Node("aten.exp.default", (Operand(0),)),
            gather,
            Node("aten.add.Tensor", (Operand(2), Operand(0, views=(View("slice", (1, 0, None, 2)),)))),
        ),
        outputs=(3,),
        dtypes=("float32", "float32", "float32", "float32"),
        differentiable=True,
    )


def test_programs_asked_for_gather_and_scatter_call_them_on_values_of_every_kind():
    found = Counter()

    @settings(max_examples=80, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(programs(require_op=("aten.gather.default", "aten.scatter.value")))
    def collect(program):
        if program is None:
            return
        function = program.function()
        function(*program.make_inputs())  # resolution ran it eagerly: its positions are in range
        for node in program.nodes:
            if node.op in ("aten.gather.default", "aten.scatter.value"):
                source = program.dtypes[node.operands[0].value]
                found[node.op] += 1
                found["a view of the source"] += bool(node.operands[0].views)
                found["a computed source"] += node.operands[0].value >= len(program.inputs)
                found["a half source"] += source in ("bfloat16", "float16")
                found["an integer source"] += source.startswith("int")
                found["several positions a row"] += node.operands[1].positions.shape != tuple(
                    1 if d == dict(node.attrs)["dim"] else s
                    for d, s in enumerate(node.operands[1].positions.shape)
                )

    collect()
    assert all(found[k] for k in ("aten.gather.default", "aten.scatter.value")), found
    assert all(count > 0 for count in found.values()) and len(found) == 7, found


def test_positions_the_program_computes_spread_over_the_dim_and_stay_in_it():
    positions = Positions((5, 3), high=7, salt=2, like=0).make(torch.device("cpu"))
    assert positions.dtype == torch.int64 and positions.shape == (5, 3)
    assert positions.min() >= 0 and positions.max() < 7 and len(positions.unique()) == 7


def test_a_program_the_backend_runs_in_pieces_is_vacuous_not_a_pass(monkeypatch):
    program = small_program()

    def broken(v0, v1):
        torch._dynamo.graph_break()
        return (v0.t() * v1,)

    monkeypatch.setattr(Program, "function", lambda self: broken)
    outcome = check(program, "fuser")
    assert outcome.status == "vacuous", outcome


@pytest.mark.parametrize(
    "make, kind, in_backward",
    [
        # The backward's multiply is the planted one too.
        (small_program, "wrong_lowering:aten.mul.Tensor", True),
        # A gather reading at the element's own position, not the one the program computed.
        (gather_program, "gather_reads_own_position", False),
    ],
    ids=["wrong_lowering", "gather_reads_own_position"],
)
def test_a_planted_miscompile_fails_the_check_and_the_clean_fuser_passes(
    monkeypatch, make, kind, in_backward
):
    program = make()
    monkeypatch.delenv(ENV, raising=False)
    assert check(program, "fuser").status == "pass"
    monkeypatch.setenv(ENV, kind)
    outcome = check(program, "fuser")
    assert outcome.status == "fail" and "outputs: result[0]" in outcome.message, outcome
    assert ("gradients: result[0]" in outcome.message) == in_backward, outcome


def test_a_repro_runs_alone_and_fails_the_same_way(tmp_path):
    program = small_program()
    path, new = write_repro(
        program,
        "outputs: planted",
        tmp_path,
        backend="fuser",
        device="cpu",
        backward=True,
        tolerance=(1.3e-6, 1e-5),
        found="a test",
    )
    assert new and path.name == f"repro_{program.key()}.py"
    assert write_repro(
        program,
        "again",
        tmp_path,
        backend="fuser",
        device="cpu",
        backward=True,
        tolerance=None,
        found="a test",
    ) == (path, False)  # deduplicated by program

    def run(planted_kind: str | None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in (ENV, "FUSER_TESTING_WRONG_LOWERING")}
        env["PYTHONPATH"] = str(REPO)
        if planted_kind:
            env[ENV] = planted_kind
        return subprocess.run(
            [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300
        )

    clean = run(None)
    assert clean.returncode == 0, clean.stdout + clean.stderr[-2000:]
    assert "def program(v0, v1):" in clean.stdout  # it prints the program
    failing = run("wrong_lowering:aten.mul.Tensor")
    assert failing.returncode == 1, failing.stdout + failing.stderr[-2000:]
    assert "result 0:" in failing.stdout and "beyond tolerance" in failing.stdout


def test_the_ci_profile_passes_on_the_clean_fuser(tmp_path):
    # The command, in a fresh process, as CI and a user run it: in a pytest worker that had run other
    # tests first, the same profile once drew programs this process did not (docs/fuzz.md).
    env = {k: v for k, v in os.environ.items() if k not in (ENV, "FUSER_TESTING_WRONG_LOWERING")}
    env["FUSER_UNVALIDATED"] = "fuse"
    command = [sys.executable, "-m", "conformance.fuzz", "--profile", "ci", "--out", str(tmp_path)]
    run = subprocess.run(
        [*command, "--json", str(tmp_path / "result.json")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    result = json.loads((tmp_path / "result.json").read_text())
    assert run.returncode == 0 and not result["failed"], run.stdout + run.stderr[-3000:]
    assert result["counts"]["pass"] >= 20, result  # vacuous and rejected programs are not passes


def test_a_run_whose_programs_mostly_compile_nothing_fails(tmp_path):
    # A fuser whose manifest enables nothing (an empty manifest folder) leaves every program eager: the
    # command says the run proved little and exits 1, where it once printed its counts and exited 0.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSER_")}
    env["FUSER_MANIFEST_DIR"] = str(tmp_path / "no-manifests")
    command = [
        sys.executable,
        "-m",
        "conformance.fuzz",
        "--examples",
        "20",
        "--no-backward",
        "--out",
        str(tmp_path),
    ]
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED" in run.stdout and "compiled nothing" in run.stdout
    # ... and stops compiling once 30 programs compiled nothing and none was checked (it drew 453 programs
    # and compiled each of them, 72 s, where its 30th said enough).
    assert "30 vacuous" in run.stdout and "not compiled (hopeless)" in run.stdout


def test_each_program_gets_a_fresh_dynamo_so_no_recompile_limit_stops_the_run(monkeypatch):
    # torch 2.11 compiled every program through one shared frame: without a reset per program, Dynamo
    # stopped compiling after its recompile limit (8) and every later program was vacuous (seen on the
    # lent GPU). The same frame is made here by calling each program through one shared code object.
    real_function = Program.function

    def through_one_frame(self, *args, **kwargs):
        function = real_function(self, *args, **kwargs)

        def inner(*inputs):
            return function(*inputs)

        return inner

    monkeypatch.setattr(Program, "function", through_one_frame)
    outcomes = Counter(check(p, "fuser", backward=False).status for p in drawn(40)[:12])
    assert outcomes["vacuous"] <= 2, outcomes


def test_a_program_torch_cannot_trace_is_not_blamed_on_the_backend(monkeypatch):
    # Found by the dev profile (seed 7): eager gives an empty result, torch's meta function raises while
    # Dynamo traces, before any backend runs: the default and `eager` backends fail it alike.
    program = small_program()

    def untraceable(v0, v1):
        return (torch.linalg.vector_norm(v0[:, :0].expand(2, 3, 0), ord=float("inf"), dim=[-2]),)

    monkeypatch.setattr(Program, "function", lambda self, widened=False: untraceable)
    outcome = check(program, "fuser")
    assert outcome.status == "tracing_rejects", outcome
    assert "vector_norm" in outcome.message


def test_a_difference_that_torchs_meta_functions_make_is_not_blamed_on_the_backend(monkeypatch):
    # Found by the dev profile (seed 11263): prims.div of two bools is float32 in eager and bool in its
    # meta function, so the fuser (and Inductor) return bool. Reported apart, never counted as a pass.
    program = small_program()

    def bool_division(v0, v1):
        flag = v0.sum() > 0
        return (torch.ops.prims.div.default(flag, flag == flag),)

    monkeypatch.setattr(Program, "function", lambda self, widened=False: bool_division)
    outcome = check(program, "fuser", backward=False)
    assert outcome.status == "meta_disagrees", outcome
    assert "torch.bool[] where eager's kernels give torch.float32[]" in outcome.message


def test_the_reference_of_an_op_with_a_dtype_computes_in_float64():
    # Found by the dev profile (seed 11261): log_softmax(v, dtype=float32) kept its dtype in the float64
    # reference, so the "reference" was float32 too, equal to eager, and a fused gradient over a
    # 16,411-long row was flagged for being 1.8e-4 from it. The input rounds as the program asks; the op
    # then runs in float64.
    program = Program(
        inputs=(Input((301,), "float32", "contiguous", False),),
        nodes=(
            Node("aten.mul.Tensor", (Operand(0), Operand(None, 3.0))),
            Node("aten.log_softmax.int", (Operand(1),), attrs=(("dim", -1), ("dtype", torch.float32))),
        ),
        outputs=(2,),
        dtypes=("float32", "float32", "float32"),
        differentiable=True,
    )
    (x,) = program.make_inputs()
    (reference,) = program.function(widened=True)(x.double())
    (eager,) = program.function()(x)
    assert reference.dtype == torch.float64
    rounded = (x * 3.0).double()  # the input the program asks log_softmax to read: 3x in float32
    torch.testing.assert_close(reference, torch.log_softmax(rounded, -1), rtol=0, atol=0)
    assert (reference - eager.double()).abs().max() > 0  # eager's float32 arithmetic is not the reference


def float_chain_of_an_int64_input(shape: tuple[int, ...], first: str, second: str) -> Program:
    """v2 = second(first(v0)), v0 an int64 tensor: the first op promotes it to float32."""
    return Program(
        inputs=(Input(shape, "int64", "contiguous", False),),
        nodes=(Node(first, (Operand(0),)), Node(second, (Operand(1),))),
        outputs=(2,),
        dtypes=("int64", "float32", "float32"),
        differentiable=False,
    )


def test_the_reference_of_an_integer_input_promoted_to_a_float_computes_in_float64():
    # Found by the validation batch (2026-11-27): cosh of an int64 tensor gives the default dtype, so the
    # float64 reference computed it in float32 exactly as eager did, and cos of that (an argument in the
    # tens of thousands) judged a fused cosh one ulp away 0.67 off.
    from conformance.fuzz.check import _reference

    program = float_chain_of_an_int64_input((3, 3), "aten.cosh.default", "aten.cos.default")
    made = program.make_inputs()
    (eager,) = program.function()(*made)
    _, (reference,), _ = _reference(program, made, (eager,), backward=False)
    assert reference.dtype == torch.float64
    exact = torch.cos(torch.cosh(made[0].double()))
    torch.testing.assert_close(reference, exact, rtol=0, atol=0)
    assert torch.get_default_dtype() == torch.float32  # restored


def test_a_program_of_integer_inputs_is_judged_with_its_float_results_rounding(monkeypatch):
    # Found by the strict fuzzer (seed 20201): exp of an int64 tensor, var over two values, exp again. The
    # fuser's var was 1.2 ulps off where eager's (accumulated in float64 on the CPU) was 0.2, and the last
    # exp multiplied that by 26; the perturbed references that measure such amplification were never run,
    # since the working dtype was read from the inputs alone, and no input was a float.
    from conformance.fuzz import check as fuzz_check

    seen = []
    real = fuzz_check.perturbation.perturbed
    monkeypatch.setattr(
        fuzz_check.perturbation, "perturbed", lambda run, dtype: seen.append(dtype) or real(run, dtype)
    )
    program = float_chain_of_an_int64_input((3, 2), "aten.exp.default", "aten.sin.default")
    assert check(program, "fuser", backward=False).status == "pass"
    assert seen == [torch.float32]
