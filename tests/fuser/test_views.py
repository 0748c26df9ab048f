"""The index mappings of views (`fuser.lower.views`): the kinds said to keep index entries do, the row kernels'
walk relies on it (`fuser.plan.row_reads` skips them)."""

from __future__ import annotations

import pytest

from fuser.emit import ir
from fuser.lower.views import KEEPS_ENTRIES, source_index


class _Sink:
    def __init__(self):
        self.made: list[str] = []

    def int_param(self, hint: str, value: int) -> str:
        return hint

    def index_temp(self, expr: ir.Expr) -> str:
        self.made.append(expr.text)
        return f"t{len(self.made)}"


# kind -> (args, view index, source shape, view shape)
CASES = {
    "expand": ({}, ("i0", "i1"), (1, 5), (4, 5)),
    "unsqueeze": ({"dim": 1}, ("i0", "0"), (4,), (4, 1)),
    "squeeze": ({"dim": 1}, ("i0",), (4, 1), (4,)),
    "alias": ({}, ("i0", "i1"), (4, 5), (4, 5)),
    "broadcast_in_dim": ({"broadcast_dimensions": [1]}, ("i0", "i1"), (5,), (4, 5)),
    # Kinds that move entries, each of which the check below refuses:
    "transpose": ({"dim0": 0, "dim1": 1}, ("i0", "i1"), (5, 4), (4, 5)),
    "slice": ({"dim": 0, "start": 1, "end": None, "step": 1}, ("i0", "i1"), (5, 5), (4, 5)),
}


def _keeps_entries(kind: str) -> bool:
    args, index, in_shape, out_shape = CASES[kind]
    sink = _Sink()
    mapped = source_index(kind, args, index, in_shape, out_shape, sink, kind)
    kept = [entry for entry in mapped if entry != "0"]
    return not sink.made and kept == [entry for entry in index if entry in kept]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_only_the_kinds_said_to_keep_index_entries_keep_them(kind):
    assert _keeps_entries(kind) == (kind in KEEPS_ENTRIES)


def test_every_kind_said_to_keep_index_entries_is_checked():
    assert set(CASES) >= KEEPS_ENTRIES
