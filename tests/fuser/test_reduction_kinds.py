"""The reduction kinds are one table (fuser.lower.reductions.KINDS): every rule a kernel is written from, and
what the interpreter needs to run it fast, is read from the kind's record."""

from __future__ import annotations

import re

import pytest

from fuser import kernel_lib
from fuser.emit.row_codegen import RowBuilder
from fuser.interpreter import reduce as interpreter_reduce
from fuser.lower.reductions import KINDS, REDUCTION_OPS


def _combine_functions(kind) -> set[str]:
    """The `lib` functions a kind's shared rules pass to tl.reduce."""
    rules = kind.combine
    text = " ".join(filter(None, (rules.finish, rules.int_finish))) if rules else ""
    return set(re.findall(r"lib\.(\w+)", text))


def test_every_reduction_op_names_a_kind_with_a_record():
    assert {op.kind for op in REDUCTION_OPS} == set(KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_kind_either_has_shared_rules_or_its_own_emitter(name):
    kind = KINDS[name]
    assert (kind.combine is None) == (kind.emitter is not None)
    if kind.emitter is not None:
        assert callable(getattr(RowBuilder, kind.emitter))
        assert not kind.splittable  # a split combines partials with the shared rules


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_combine_function_a_kind_calls_has_a_numpy_twin_on_the_interpreter(name):
    # Without one the interpreter calls the combine function once per element, in Python: a reduction
    # over a 4096-element block takes seconds. lib.add is the interpreter's own sum there.
    kind = KINDS[name]
    for function in _combine_functions(kind) - {"add"}:
        assert function in kind.numpy_twins, f"{name}: lib.{function} has no NumPy twin"
    for function, twin in kind.numpy_twins.items():
        assert hasattr(kernel_lib, function), f"{name}: lib.{function} is not in fuser.kernel_lib"
        assert callable(getattr(interpreter_reduce, twin)), f"{name}: no interpreter_reduce.{twin}"


def test_the_interpreter_reduces_with_every_twin_a_kind_declares():
    from fuser.interpreter.shim import interpreter_lib

    lib = interpreter_lib()
    for kind in KINDS.values():
        for function, twin in kind.numpy_twins.items():
            assert getattr(lib, function).numpy_reduce is getattr(interpreter_reduce, twin), kind.name
