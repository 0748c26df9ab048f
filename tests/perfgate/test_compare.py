"""`compare`: ratios to the reference backend in a table, and the same as a bar plot."""

from __future__ import annotations

import pytest

from perfgate.compare import plot, tables
from perfgate.metrics import Sample

RESULTS = {
    "fuser": {"softmax": {"host_instructions": Sample.exact(4_000_000)}},
    "inductor": {"softmax": {"host_instructions": None}},
    "eager": {"softmax": {"host_instructions": Sample.exact(20_000)}},
}


def test_the_table_gives_each_backend_as_a_ratio_to_the_reference_and_a_dash_where_unmeasured():
    text = tables(RESULTS, "eager", ("host_instructions",))
    header, _, row = text.splitlines()[1:]
    assert header.split() == ["workload", "fuser", "inductor", "eager", "fuser/eager", "inductor/eager"]
    assert row.split() == ["softmax", "4,000,000", "—", "20,000", "200.00×", "—"]


def test_the_plot_is_written_as_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "compare.png"
    plot(RESULTS, "eager", ("host_instructions",), path)
    assert path.read_bytes().startswith(b"\x89PNG")
