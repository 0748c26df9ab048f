"""Every statement of every probe kernel records the kernel's names its text reads.

Levels (which mask a load takes, what a looped row kernel hoists out of its loop) and index liveness are
read from what each `fuser.emit.ir` expression records as it is made, not from its text. A read left out
would be silent: a per-element value hoisted out of a loop, or an index line dropped. This checks the
records against the text (here, in a test, the text is parsed) for the kernels every lowered op's
probes emit: each op alone, producing, consuming, reduced and reading a reduction, every dtype.
"""

from __future__ import annotations

import re

import pytest
from torch import fx

from fuser.emit import ir
from fuser.lower.lowerings import DTYPES_BY_NAME, _overload, lowerings
from fuser.validate import probes

# Names a statement's text mentions, a keyword argument's name (`mask=`) left out.
NAME = re.compile(r"\b[A-Za-z_]\w*\b(?!\s*=(?!=))")


def _defined(statements) -> set[str]:
    names: set[str] = set()
    for s in statements:
        if isinstance(s, ir.Assign):
            names.add(s.target)
        elif isinstance(s, ir.Update):
            names |= set(s.targets)
        elif isinstance(s, ir.Loop):
            names |= {s.variable} | _defined(s.body)
    return names


def unrecorded_reads(statements, defined: set[str]) -> list[str]:
    """Each statement whose text reads one of `defined` that it does not record."""
    found = []
    for s in statements:
        if isinstance(s, ir.Loop):
            for part in (s.start, s.end):
                missing = set(NAME.findall(part.text)) & defined - part.reads
                found += [f"range bound {part.text!r} misses {sorted(missing)}"] if missing else []
            found += unrecorded_reads(s.body, defined)
            continue
        text = s.expr.text
        missing = set(NAME.findall(text)) & defined - s.reads
        if missing:
            found.append(f"{ir.lines([s])[0]!r} misses {sorted(missing)}")
    return found


def test_a_read_left_unrecorded_is_found():
    loop = ir.Loop("col_start", ir.name("a"), ir.name("b"), "RBLOCK", (ir.Assign("c", ir.Expr("x0 + 1"), 1),))
    statements = [ir.Assign("x0", ir.over("tl.load(p)", "p"), 2), loop]
    assert unrecorded_reads(statements, _defined(statements)) == ["'c = x0 + 1' misses ['x0']"]


@pytest.mark.parametrize("name", sorted(lowerings()))
def test_every_probe_kernel_records_what_it_reads(name):
    dtypes = tuple(DTYPES_BY_NAME[d] for d in lowerings()[name].dtypes)
    kernels = 0
    for label, made in probes.plans(name, _overload(name), dtypes, "cpu"):
        if isinstance(made, Exception):
            continue  # a probe the lowering refuses emits no kernel
        plan, generated = made
        for step in plan.steps:
            if isinstance(step, fx.Node):
                continue  # an eager step
            for source in generated.variants(step) or ():
                kernels += 1
                statements = source.statements
                assert statements, f"{label}: {source.name} keeps no statements"
                defined = _defined(statements) | {param for param, _ in source.params}
                assert unrecorded_reads(statements, defined) == [], f"{label}: {source.name}"
    assert kernels, f"{name}: no probe emitted a kernel"
