"""The command line without a base: counts against the committed file, timings as history, exit status
and the reports it writes."""

from __future__ import annotations

import json

from perfgate import baselines
from perfgate.cli import main
from perfgate.machine import this_machine
from perfgate.metrics import Sample

GATE = ["gate", "--tier", "cpu", "--counts-only", "--workload", "pointwise_chain"]


def test_a_gate_with_no_baseline_file_passes_and_says_so(tmp_path, capsys):
    assert main([*GATE, "--baseline-dir", str(tmp_path)]) == 0
    assert "cpu.json has no section for " in capsys.readouterr().out


def test_a_gate_that_finds_a_regression_exits_one_and_writes_every_report(tmp_path, capsys):
    fewer_launches = {
        "pointwise_chain": {"kernel_launches": Sample.exact(0), "bytes_moved": Sample.exact(3870)}
    }
    recorded = baselines.updated(None, this_machine("cpu"), "fuser", fewer_launches)
    baselines.write(baselines.baseline_path("cpu", tmp_path), recorded)
    out = tmp_path / "reports"
    assert main([*GATE, "--baseline-dir", str(tmp_path), "--out", str(out)]) == 1
    assert "1 regression(s): pointwise_chain kernel_launches inf× against cpu.json" in capsys.readouterr().out
    assert (
        "| pointwise_chain | kernel_launches | cpu.json | 0 | 1 | inf× | — | exact | REGRESSION |"
        in (out / "report.md").read_text()
    )
    assert json.loads((out / "head.json").read_text())["perfgate"]["failed"]
    assert (out / "ratios.png").exists() and not (out / "base.json").exists()
