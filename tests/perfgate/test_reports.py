"""Reports: the terminal table, Markdown for a pull request, the plot of ratios, and a JSON file per
tree that pytest-benchmark can read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.gate import GateRequest, GateResult
from perfgate.machine import REPOSITORY, Machine
from perfgate.metrics import METRICS, Sample
from perfgate.report import benchmark_json, markdown, plot, text
from perfgate.trees import Tree
from perfgate.verdict import judge, pooled

H100 = Machine("gpu", "sm_90", "NVIDIA H100 80GB HBM3", "570.1")
KERNEL, LAUNCHES = METRICS["kernel_time_ms"], METRICS["kernel_launches"]


def per_process(*medians: float) -> list[Sample]:
    return [Sample.of([m, m * 1.001, m * 0.999]) for m in medians]


SAMPLES = {
    "base": {
        "softmax": {
            "kernel_launches": [Sample.exact(1)] * 3,
            "kernel_time_ms": per_process(0.20, 0.201, 0.199),
        }
    },
    "head": {
        "softmax": {
            "kernel_launches": [Sample.exact(1)] * 3,
            "kernel_time_ms": per_process(0.25, 0.251, 0.249),
        }
    },
}


def a_failing_gate() -> GateResult:
    head, base = SAMPLES["head"]["softmax"], SAMPLES["base"]["softmax"]
    verdicts = [
        judge("softmax", LAUNCHES, pooled(base["kernel_launches"]), pooled(head["kernel_launches"]), "base"),
        judge("softmax", LAUNCHES, Sample.exact(1), pooled(head["kernel_launches"]), "sm_90.json"),
        judge("softmax", KERNEL, pooled(base["kernel_time_ms"]), pooled(head["kernel_time_ms"]), "base"),
    ]
    trees = [Tree("head", REPOSITORY, "a" * 40), Tree("base", Path("/tmp/base"), "HEAD")]
    return GateResult(
        GateRequest("gpu", ["softmax"], against="main"),
        H100,
        trees,
        Path("sm_90.json"),
        True,
        verdicts,
        seed=11,
        processes={"head": 3, "base": 3},
        samples=SAMPLES,
        planted={"softmax": [0.098, 0.101, 0.1]},
        seconds=42.0,
    )


def test_the_table_shows_reference_head_ratio_interval_threshold_and_verdict():
    report = text(a_failing_gate())
    (row,) = [line for line in report.splitlines() if line.startswith("softmax   kernel_time")]
    cells = [cell.strip() for cell in row.split("  ") if cell.strip()]
    assert cells[:6] == ["softmax", "kernel_time_ms", "base", "0.2 ms ±0.001", "0.25 ms ±0.001", "1.250×"]
    assert cells[6].startswith("[1.2") and cells[7:] == ["+5%", "REGRESSION"]
    assert "1 regression(s): softmax kernel_time_ms 1.250× [1.2" in report
    assert "order seed 11 (--seed 11 repeats it)" in report
    assert "testing-only kernel slowdown planted in head's softmax: +9.8%, +10.1%, +10.0% achieved" in report
    assert report.rstrip().endswith(
        "FAIL: fuser on NVIDIA H100 80GB HBM3 (sm_90), gpu tier, head aaaaaaaaaa against base HEAD"
    )


def test_the_markdown_report_is_a_table_with_one_row_per_verdict():
    report = markdown(a_failing_gate())
    assert report.startswith("### perfgate ❌ FAIL")
    rows = [line for line in report.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(a_failing_gate().verdicts)
    assert "| softmax | kernel_launches | sm_90.json | 1 | 1 | 1.000× | — | exact | ok |" in rows


def test_the_plot_of_ratios_is_written_as_a_png(tmp_path):
    plot(a_failing_gate(), tmp_path / "ratios.png")
    assert (tmp_path / "ratios.png").read_bytes().startswith(b"\x89PNG")


def test_each_tree_gets_a_json_report_that_pytest_benchmark_compare_reads(tmp_path):
    for role in ("head", "base"):
        (tmp_path / f"000{len(role)}_{role}.json").write_text(
            json.dumps(benchmark_json(a_failing_gate(), role))
        )
    compared = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchmark",
            "compare",
            *map(str, tmp_path.iterdir()),
            "--columns=median",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Failed to load" not in compared.stderr + compared.stdout
    assert "softmax[kernel_time_ms]" in compared.stdout


def test_the_json_report_carries_the_gpu_the_trees_commit_and_the_medians_of_its_processes():
    head = benchmark_json(a_failing_gate(), "head")
    assert head["machine_info"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert len(head["commit_info"]["id"]) == 40
    (timing,) = [b for b in head["benchmarks"] if b["name"] == "softmax[kernel_time_ms]"]
    assert timing["stats"]["data"] == pytest.approx([0.249e-3, 0.25e-3, 0.251e-3])
    assert timing["extra_info"]["processes"] == 3 and timing["extra_info"]["verdict"] == "REGRESSION"
    assert head["perfgate"] == {
        "tree": "head",
        "failed": True,
        "exit_status": 1,
        "seed": 11,
        "strict": False,
        "baseline": "sm_90.json",
    }
