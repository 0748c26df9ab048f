"""The command line: exit status, reports written, and a missing baseline reported rather than judged."""

from __future__ import annotations

import json

from perfgate import baselines
from perfgate.cli import main
from perfgate.machine import this_machine
from perfgate.metrics import Sample

GATE = ["gate", "--tier", "cpu", "--counts-only", "--workload", "pointwise_chain"]


def test_a_gate_with_no_baseline_file_passes_and_says_so(tmp_path, capsys):
    assert main([*GATE, "--baseline-dir", str(tmp_path)]) == 0
    assert "no baseline for this device (" in capsys.readouterr().out


def test_a_gate_that_finds_a_regression_exits_one_and_writes_both_reports(tmp_path, capsys):
    fewer_launches = {
        "pointwise_chain": {"kernel_launches": Sample.exact(0), "bytes_moved": Sample.exact(3870)}
    }
    recorded = baselines.updated(None, this_machine("cpu"), "fuser", fewer_launches)
    baselines.write(baselines.baseline_path("cpu", tmp_path), recorded)
    markdown, report = tmp_path / "gate.md", tmp_path / "gate.json"
    status = main(
        [*GATE, "--baseline-dir", str(tmp_path), "--markdown", str(markdown), "--json", str(report)]
    )
    assert status == 1
    assert "1 regression(s): pointwise_chain kernel_launches" in capsys.readouterr().out
    assert "| pointwise_chain | kernel_launches | 0 | 1 |" in markdown.read_text()
    assert json.loads(report.read_text())["perfgate"]["failed"]
