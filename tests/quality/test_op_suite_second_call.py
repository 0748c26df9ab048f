"""Quality test: the op suite calls each case's compiled program twice, so a backend whose later calls
take another path (the fuser's call written out from the second call, `fuser/runtime/call_function.py`)
is checked on the path users' code runs from then on. Planted here, as in the fuzzer's test: the written
call passes a kernel its first tensor operand in every tensor operand's place."""

from __future__ import annotations

from conformance.harness.runner import run_case
from conformance.specs.catalog import SPECS
from fuser.runtime import call_function


def mul_case():
    return run_case(SPECS["aten.mul.Tensor"], "float32", "alone", "fwd", "fuser", "cpu", "quick")


def test_a_wrong_second_call_fails_the_case_and_is_named(monkeypatch):
    original = call_function._Writer.arguments

    def first_operand_everywhere(self, stage, outputs, partials):
        args = original(self, stage, outputs, partials)
        for position, _ in stage.tensors:
            args[position] = args[stage.tensors[0][0]]
        return args

    monkeypatch.setattr(call_function._Writer, "arguments", first_operand_everywhere)
    result = mul_case()
    assert result.failures, "the planted second call passed"
    assert all(failure.startswith("the second call: ") for failure in result.failures), result.failures


def test_without_the_plant_both_calls_pass():
    result = mul_case()
    assert result.samples > 1 and not result.failures and not result.left_eager, result
