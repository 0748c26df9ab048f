"""Quality test: the fuzzer calls each program twice, so a backend whose later calls take another path (the
fuser's call written out from the second call, `fuser/runtime/call_function.py`; a CUDA graph replayed)
is checked on that path too. Planted here: the written call passes a kernel its first tensor operand in
every tensor operand's place, which the first call (the general loop) never does."""

from __future__ import annotations

from conformance.fuzz.run import fuzz
from fuser.runtime import call_function


def test_a_wrong_second_call_is_found_and_named(monkeypatch, tmp_path):
    original = call_function._Writer.arguments

    def first_operand_everywhere(self, stage, outputs, partials):
        args = original(self, stage, outputs, partials)
        for position, _ in stage.tensors:
            args[position] = args[stage.tensors[0][0]]
        return args

    monkeypatch.setattr(call_function._Writer, "arguments", first_operand_everywhere)
    report = fuzz("fuser", "cpu", "ci", examples=20, out=tmp_path, backward=False)
    assert report.failure is not None, report.summary()
    assert report.message.startswith("the second call: "), report.summary()
    assert list(tmp_path.glob("repro_*.py")), report.summary()


def test_without_the_plant_the_same_programs_pass(tmp_path):
    report = fuzz("fuser", "cpu", "ci", examples=20, out=tmp_path, backward=False)
    assert report.failure is None and report.counts["pass"] > 10, report.summary()
