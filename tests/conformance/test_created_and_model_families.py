"""The families that cover what models run: created tensors meet inputs in the program, their float64
reference keeps the op's own rounding, and a case whose op never reached the backend fails."""

from __future__ import annotations

import dataclasses

import torch

from conformance.harness.report import markdown
from conformance.harness.runner import Program, expect, run_case
from conformance.specs.catalog import SPECS
from conformance.specs.samples import Sample, generate


def test_a_created_tensor_is_combined_with_the_samples_input_in_the_program():
    sample = generate(SPECS["aten.arange.default"], "bfloat16", "quick")[0]
    program = Program(SPECS["aten.arange.default"], "alone", [sample])
    assert "combine(op(" in program.source and "device=in0.device" in program.source
    assert program.inputs == [sample.partner]  # the partner is an input: nothing to fold


def test_the_reference_of_a_created_tensor_keeps_its_dtypes_rounding():
    # full_like(x, 0.1) in bfloat16 holds bfloat16(0.1); a float64 program would hold 0.1 itself and
    # so side with a backend that forgot to round (found that way: docs/conformance.md).
    spec = SPECS["aten.full_like.default"]
    x = torch.tensor([0.1, 1.0], dtype=torch.bfloat16)
    expected = expect(spec, "alone", Sample((x, 0.1), {}, "probe", x), False, 0)
    difference, _, equal = expected.reference
    assert difference.dtype == torch.float64 and difference[0].item() == 0.0
    assert equal[0].item()


def test_the_gradient_reference_of_a_combined_op_is_float64s():
    # masked_fill(x, mask, v) met by x: a = r - x and b = r * x. Eager adds the gradient's pieces in
    # bfloat16 (5 % off at x = 1.32); the reference did the same, as it ran the op on bfloat16 inputs, and
    # failed the fuser's exact float32 sum (issue 27). Now its gradient is float64's.
    spec = SPECS["aten.masked_fill.Scalar"]
    x = (torch.linspace(-3, 3, 259, dtype=torch.float64) ** 3).to(torch.bfloat16).reshape(37, 7)
    mask = torch.arange(259).reshape(37, 7) % 3 == 0
    expected = expect(spec, "alone", Sample((x, mask, -0.0), {}, "probe", x), True, 0)
    g_a, g_b = (g.double() for g in expected.grad_outputs)
    wide, keep = x.double(), (~mask).double()
    r = wide * keep
    exact = g_a * (keep - 1) + g_b * (keep * wide + r)
    assert torch.equal(expected.reference_grads[0], exact)
    assert not torch.equal(expected.grads[0].double(), exact)  # eager's own sum is rounded


def test_a_case_whose_op_the_backend_never_received_fails_unless_the_spec_says_why():
    # nonzero has a data-dependent shape: Dynamo runs it eagerly behind a graph break.
    told = SPECS["aten.nonzero.default"]
    untold = dataclasses.replace(told, graph_break_reason="")
    assert not run_case(told, "int64", "alone", "fwd", "eager", "cpu", "quick").failures
    failures = run_case(untold, "int64", "alone", "fwd", "eager", "cpu", "quick").failures
    assert failures and "never compiled aten.nonzero.default" in failures[0]


def test_a_case_whose_graph_the_backend_raised_on_fails_too(monkeypatch):
    # Dynamo runs a graph its backend raised on eagerly (a graph break): the op reached the backend but
    # was never compiled, so the case would pass vacuously (found: index_fill.int_Tensor's backward on the
    # CPU, where the joint graph holds aten._unique).
    from conformance.harness import runner

    def refusing(graph_module, example_inputs, **kwargs):
        # What AOTAutograd raised there: Dynamo turns it into a graph break, not an error.
        raise torch._subclasses.fake_tensor.DynamicOutputShapeException(torch.ops.aten._unique.default)

    monkeypatch.setattr(runner, "backend_function", lambda backend: refusing)
    spec = SPECS["aten.neg.default"]
    failures = run_case(spec, "float32", "alone", "fwd", "eager", "cpu", "quick").failures
    assert failures and "never compiled aten.neg.default" in failures[0]


def test_a_loss_target_gets_no_gradient():
    spec = SPECS["aten.nll_loss.default"]
    sample = generate(spec, "float32", "quick")[0]
    program = Program(spec, "alone", [sample])
    target = next(i for i, t in enumerate(program.inputs) if t is sample.args[1])
    assert program.frozen == {target}


def test_the_report_says_how_many_overloads_the_suite_knows():
    known = {"overloads": 441, "not_inplace": 326, "inplace_twins": 115}
    text = markdown([], {"backend": "fuser", "device": "cpu", "known": known})
    assert "The suite knows 441 aten overloads: 326 ops and 115 in-place twins." in text


def reseeding_backend(graph_module, example_inputs):
    """A backend that draws from a fresh seed on every call: not reproducible under manual_seed."""

    def run(*args):
        torch.seed()
        return graph_module.forward(*args)

    return run


def test_random_ops_are_checked_for_what_can_be_checked():
    spec = SPECS["aten.native_dropout.default"]
    x = torch.randn(100, 50)
    torch.manual_seed(0)
    out, mask = torch.ops.aten.native_dropout(x, 0.3, True)
    sample = Sample((x, 0.3, True), {}, "probe")
    assert spec.check(sample, (out, mask), None, None) == ""
    assert "fraction kept" in spec.check(sample, (x / 0.7, torch.ones_like(mask)), None, None)
    assert "output" in spec.check(sample, (out, ~mask), None, None)
    grad = torch.randn_like(x)
    other = torch.rand_like(x) > 0.3  # a backward that draws its own mask
    assert spec.check(sample, (out, mask), [grad * mask / 0.7], [grad]) == ""
    assert "gradient" in spec.check(sample, (out, mask), [grad * other / 0.7], [grad])


def test_a_random_op_must_give_the_same_values_under_the_same_seed():
    spec = SPECS["aten.rand_like.default"]
    assert not run_case(spec, "float32", "alone", "fwd", "eager", "cpu", "quick").failures
    backend = f"{__name__}:reseeding_backend"
    failures = run_case(spec, "float32", "alone", "fwd", backend, "cpu", "quick").failures
    assert failures and "same torch.manual_seed" in failures[-1]


def test_a_sample_moved_to_another_device_creates_its_tensors_there():
    # rand([37, 7], device=...) has no input to carry the device: the sample's device= must move too,
    # or a CUDA run compiles and checks a CPU program (seen on the lent GPU, 2026-11-26).
    from conformance.harness.runner import on_device
    from conformance.specs.samples import Sample

    sample = Sample(([37, 7],), {"dtype": torch.float32, "device": torch.device("cpu")}, "created")
    assert on_device(sample, "meta").kwargs["device"] == torch.device("meta")


def test_the_reference_of_an_integer_input_an_op_makes_float_is_float64s():
    # cos of an int32 tensor gives the default dtype: the conformance reference, like the fuzzer's, runs
    # with float64 as the default, so it is not eager's own float32 arithmetic.
    x = torch.tensor([[7, 100000, -33]], dtype=torch.int32)
    expected = expect(SPECS["aten.cos.default"], "alone", Sample((x,), {}, "probe"), False, 0)
    assert expected.output.dtype == torch.float32
    assert expected.reference.dtype == torch.float64
    assert torch.equal(expected.reference, torch.cos(x.double()))
    assert torch.get_default_dtype() == torch.float32
