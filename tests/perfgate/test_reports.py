"""Reports: the terminal table, Markdown for a pull request, and JSON that pytest-benchmark can read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from perfgate.gate import GateResult
from perfgate.machine import Machine
from perfgate.metrics import METRICS, Sample
from perfgate.report import benchmark_json, markdown, text
from perfgate.verdict import confirm, judge

H100 = Machine("gpu", "sm_90", "NVIDIA H100 80GB HBM3", "570.1")


def a_failing_gate(strict: bool = False) -> GateResult:
    slower = judge(
        "softmax", METRICS["kernel_time_ms"], Sample(0.2, 0.001, 50), Sample(0.25, 0.001, 50), True
    )
    verdicts = [
        judge("softmax", METRICS["kernel_launches"], Sample.exact(1), Sample.exact(1), True),
        confirm(slower, Sample(0.26, 0.001, 50)),
        judge("rms_norm", METRICS["kernel_launches"], Sample.exact(2), Sample.exact(1), True),
        judge("rms_norm", METRICS["host_time_us"], None, Sample.of([40.0, 41.0, 39.5]), True),
    ]
    return GateResult(H100, "fuser", Path("sm_90.json"), True, verdicts, strict)


def test_the_table_shows_each_verdict_with_its_ratio_and_re_run():
    report = text(a_failing_gate())
    (row,) = [line for line in report.splitlines() if line.startswith("softmax   kernel_time")]
    cells = [cell.strip() for cell in row.split("  ") if cell.strip()]
    assert cells == [
        "softmax",
        "kernel_time_ms",
        "0.2 ms ±0.001",
        "0.25 ms ±0.001",
        "1.250×",
        "±5.0%",
        "REGRESSION (re-run 1.300×)",
    ]
    assert "1 regression(s): softmax kernel_time_ms 1.250×" in report
    assert "rebaseline with `python -m perfgate update --tier gpu --workload rms_norm`" in report
    assert report.rstrip().endswith("FAIL: fuser on NVIDIA H100 80GB HBM3 (sm_90), gpu tier")


def test_a_host_time_verdict_shows_each_of_its_re_runs():
    host = METRICS["host_time_us"]
    slower = judge("softmax", host, Sample(50.0, 0.5, 9), Sample(72.0, 0.5, 9), True)
    confirmed = confirm(confirm(slower, Sample(70.0, 0.5, 9)), Sample(71.0, 0.5, 9))
    result = GateResult(H100, "fuser", Path("sm_90.json"), True, [confirmed], False)
    assert "REGRESSION (re-runs 1.400×, 1.420×)" in text(result)
    (timing,) = benchmark_json(result)["benchmarks"]
    assert timing["extra_info"]["rerun_ratios"] == [1.4, 1.42]
    assert timing["extra_info"]["rerun_ratio"] == 1.42


def test_the_markdown_report_is_a_table_with_one_row_per_verdict():
    report = markdown(a_failing_gate())
    assert report.startswith("### perfgate ❌ FAIL")
    rows = [line for line in report.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(a_failing_gate().verdicts)
    assert "| rms_norm | host_time_us | — | 40 us ±0.5 | — | — | no baseline |" in rows


def test_the_json_report_is_read_by_pytest_benchmark_compare(tmp_path):
    path = tmp_path / "0001_perfgate.json"
    path.write_text(json.dumps(benchmark_json(a_failing_gate())))
    compared = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(path), "--columns=min,median,max"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Failed to load" not in compared.stderr + compared.stdout
    assert "softmax[kernel_time_ms]" in compared.stdout


def test_the_json_report_carries_the_gpu_name_the_commit_and_seconds_for_timings():
    report = benchmark_json(a_failing_gate())
    assert report["machine_info"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert len(report["commit_info"]["id"]) == 40
    (timing,) = [b for b in report["benchmarks"] if b["name"] == "softmax[kernel_time_ms]"]
    assert timing["stats"]["median"] == 0.25e-3
    assert timing["extra_info"] == {
        "unit": "s",
        "baseline": 0.2e-3,
        "ratio": 1.25,
        "threshold": 0.05,
        "verdict": "REGRESSION",
        "rerun_ratio": 1.3,
        "rerun_ratios": [1.3],
    }
    assert report["perfgate"]["failed"]
