"""Reports of a run: JSON totals and cases, the Markdown op × dtype matrix and its failures, the summary."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.harness.report import (
    CaseResult,
    case_from_json,
    filename_safe,
    markdown,
    summary,
    to_json,
    write,
)
from conformance.specs.caseid import CaseKey

META = {
    "backend": "fuser",
    "device": "cpu",
    "tier": "quick",
    "torch": "2.13.0",
    "command": "pytest conformance",
}


def result(op, dtype, outcome, direction="fwd", context="alone", duration_s=0.01, message=""):
    key = CaseKey(op, dtype, context, direction, "fuser", "cpu")
    return CaseResult(key, outcome, duration_s, samples=4, message=message)


def a_run() -> list[CaseResult]:
    return [
        result("aten.sin.default", "float32", "passed"),
        result("aten.sin.default", "float32", "passed", direction="bwd"),
        result("aten.add.Tensor", "float16", "passed"),
        result(
            "aten.add.Tensor", "float16", "failed", context="producer", message="max abs error 0.5\ntraceback"
        ),
        result("aten.add.Tensor", "float16", "xfailed", direction="bwd", message="known: half backward"),
        result("aten.add.Tensor", "int8", "skipped"),
        result("aten.add.Tensor", "float32", "xpassed", duration_s=2.5),
    ]


def table_rows(report: str) -> list[list[str]]:
    lines = [line for line in report.splitlines() if line.startswith("|") and "---" not in line]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_json_counts_each_outcome_the_ops_and_each_ops_cases():
    data = to_json(a_run(), META)
    assert data["meta"] == META
    totals = data["totals"]
    assert (totals["ops"], totals["cases"]) == (2, 7)
    assert [totals[o] for o in ("passed", "failed", "xfailed", "xpassed", "skipped", "error")] == [
        3,
        1,
        1,
        1,
        1,
        0,
    ]
    assert totals["duration_s"] == pytest.approx(2.56)
    assert data["per_op"]["aten.sin.default"]["passed"] == 2
    assert data["per_op"]["aten.add.Tensor"]["failed"] == 1


def test_the_json_lists_every_case_flat_sorted_by_id_and_serialisable():
    cases = json.loads(json.dumps(to_json(a_run(), META)))["cases"]
    assert len(cases) == 7
    assert [case["id"] for case in cases] == sorted(case["id"] for case in cases)
    failed = next(case for case in cases if case["outcome"] == "failed")
    assert failed["id"] == "aten.add.Tensor-float16-producer-fwd"
    assert (failed["op"], failed["dtype"], failed["context"], failed["backend"], failed["samples"]) == (
        "aten.add.Tensor",
        "float16",
        "producer",
        "fuser",
        4,
    )


def test_the_markdown_matrix_has_a_row_per_op_and_a_column_per_dtype_that_ran():
    header, *rows = table_rows(markdown(a_run(), META))
    assert header == ["op", "float16", "float32", "int8"]
    assert [row[0] for row in rows] == ["`aten.add.Tensor`", "`aten.sin.default`"]
    assert all(len(row) == len(header) for row in rows)


def test_a_cell_shows_fwd_and_bwd_with_the_worst_news_and_its_count():
    add, sin = table_rows(markdown(a_run(), META))[1:]
    assert add[1:] == ["❌ 1/2 · ⚠️", "❌ 1/1 · —", "⏭️ · —"]
    assert sin[1:] == ["—", "✅ · ✅", "—"]


def test_the_markdown_names_backend_device_totals_and_a_legend():
    report = markdown(a_run(), META)
    assert report.startswith("### Conformance: `fuser` on cpu\n")
    assert "2 ops, 7 cases: 3 passed, 1 failed, 1 xfailed, 1 xpassed, 1 skipped, 0 errors" in report
    assert "tier quick · torch 2.13.0 · `pytest conformance`" in report
    assert "A cell reads fwd · bwd. ✅ all that ran passed" in report


def test_failed_and_xpassed_cases_are_listed_under_failures_with_the_first_line_of_their_message():
    report = markdown(a_run(), META)
    failures = report.split("#### Failures (2)\n", 1)[1].splitlines()
    assert failures == [
        "- `aten.add.Tensor-float16-producer-fwd` — failed: max abs error 0.5",
        "- `aten.add.Tensor-float32-alone-fwd` — xpassed: passed, but the ledger expects it to fail: remove its entry",
    ]
    assert "traceback" not in report


def test_a_long_failure_message_is_cut_to_one_short_line():
    report = markdown([result("aten.add.Tensor", "float32", "error", message="x" * 500)], META)
    (line,) = [line for line in report.splitlines() if line.startswith("- ")]
    assert line.endswith("…") and len(line) < 300


def test_a_run_without_problems_says_there_are_no_failures():
    report = markdown([result("aten.add.Tensor", "float32", "passed")], META)
    assert "No failures." in report and "#### Failures" not in report


def test_a_run_without_cases_makes_a_report_that_says_so():
    assert "No cases ran." in markdown([], META)
    assert to_json([], META)["totals"]["cases"] == 0
    assert summary([]) == (
        "0 ops, 0 cases: 0 passed, 0 failed, 0 xfailed, 0 xpassed, 0 skipped, 0 errors, 0 not validated"
    )


def test_the_summary_gives_the_totals_and_the_five_slowest_cases_slowest_first():
    run = [
        result("aten.add.Tensor", "float32", "passed", context=c, duration_s=t)
        for c, t in [
            ("alone", 0.5),
            ("producer", 3.0),
            ("consumer", 0.1),
            ("into_reduction", 1.0),
            ("from_reduction", 2.0),
        ]
    ]
    run.append(result("aten.sin.default", "float32", "passed", duration_s=0.05))
    lines = summary(run).splitlines()
    assert lines[0].startswith("2 ops, 6 cases: 6 passed")
    assert lines[1] == "slowest 5:"
    assert [line.split()[-1] for line in lines[2:]] == [
        "aten.add.Tensor-float32-producer-fwd",
        "aten.add.Tensor-float32-from_reduction-fwd",
        "aten.add.Tensor-float32-into_reduction-fwd",
        "aten.add.Tensor-float32-alone-fwd",
        "aten.add.Tensor-float32-consumer-fwd",
    ]
    assert "3.00 s" in lines[2]


def test_an_unknown_outcome_is_refused():
    with pytest.raises(ValueError, match="'xfail'"):
        result("aten.add.Tensor", "float32", "xfail")


@pytest.mark.parametrize(
    ("name", "safe"),
    [("fuser", "fuser"), ("my.backends:fast", "my.backends_fast"), ("a/b\\c d", "a_b_c_d"), ("..", "_")],
)
def test_a_backend_name_is_made_safe_for_a_file_name(name, safe):
    assert filename_safe(name) == safe


def test_write_puts_json_and_markdown_named_after_backend_and_device_into_the_directory(tmp_path):
    meta = {**META, "backend": "my.backends:fast"}
    json_path, markdown_path = write(a_run(), meta, tmp_path / "reports")
    assert json_path == tmp_path / "reports" / "conformance-my.backends_fast-cpu.json"
    assert markdown_path == tmp_path / "reports" / "conformance-my.backends_fast-cpu.md"
    assert json.loads(json_path.read_text())["totals"]["cases"] == 7
    assert markdown_path.read_text() == markdown(a_run(), meta)


def test_a_case_reads_back_as_it_was_written():
    run = a_run()
    assert [case_from_json(case) for case in to_json(run, META)["cases"]] == sorted(
        run, key=lambda result: result.key.test_id
    )


def test_sharded_reports_merge_into_one_record(tmp_path):
    run = a_run()
    first, _ = write(run[:3], {**META, "command": "shard 1"}, tmp_path / "one")
    second, _ = write(run[3:], {**META, "command": "shard 2"}, tmp_path / "two")
    script = Path(__file__).parents[2] / "tools" / "merge_reports.py"
    out = tmp_path / "merged"
    done = subprocess.run(
        [sys.executable, script, first, second, "--out", out], capture_output=True, text=True, check=True
    )
    merged = json.loads(out.with_suffix(".json").read_text())
    assert merged["totals"] == to_json(run, META)["totals"]
    assert merged["meta"]["shards"] == 2 and merged["meta"]["command"] == "shard 1; shard 2"
    assert [case["outcome"] for case in merged["cases"]] == ["failed"]  # passing cases are left out
    assert out.with_suffix(".md").read_text() == markdown(run, merged["meta"])
    assert summary(run).splitlines()[0] in done.stdout

    again = subprocess.run(
        [sys.executable, script, first, first, "--out", out], capture_output=True, text=True
    )
    assert again.returncode != 0 and "is in another shard too" in again.stderr


def test_ledger_entries_drafted_with_reasons_cover_exactly_the_failures(tmp_path):
    from conformance.harness.ledger import Ledger

    run = [
        result("aten.add.Tensor", "float16", "failed", context="producer", message="output: x"),
        result("aten.add.Tensor", "float16", "failed", context="consumer", message="output: x"),
        result("aten.add.Tensor", "float16", "passed"),
        result("aten.add.Tensor", "float32", "failed", message="output: y"),
        result("aten.sin.default", "float32", "failed", direction="bwd", message="gradients: z"),
    ]
    report, _ = write(run, META, tmp_path / "report")
    reasons = tmp_path / "reasons.toml"
    reasons.write_text('"aten.add.Tensor" = "a known cause, with \\"quotes\\""\n')
    script = Path(__file__).parents[2] / "tools" / "ledger_from_report.py"
    drafted = subprocess.run(
        [sys.executable, script, report, "--reasons", reasons], capture_output=True, text=True, check=True
    ).stdout
    ledger_path = tmp_path / "ledger.toml"
    ledger_path.write_text(drafted)
    ledger = Ledger.load(ledger_path)
    assert len(ledger.entries) == 3  # add float16's two contexts share one entry
    for case in run:
        assert (ledger.match(case.key) is not None) == (case.outcome == "failed"), case.key
    assert ledger.match(run[0].key).reason == "a known cause, with 'quotes'"
    assert ledger.match(run[4].key).reason.startswith("open bug found by the suite: gradients: z")


def test_ledger_entries_drafted_for_this_tier_expect_the_failure_only_there(tmp_path):
    from conformance.harness.ledger import Ledger

    run = [result("aten.add.Tensor", "float16", "failed", message="output: x")]
    report, _ = write(run, META | {"tier": "full"}, tmp_path / "report")
    script = Path(__file__).parents[2] / "tools" / "ledger_from_report.py"
    drafted = subprocess.run(
        [sys.executable, script, report, "--this-tier"], capture_output=True, text=True, check=True
    ).stdout
    ledger_path = tmp_path / "ledger.toml"
    ledger_path.write_text(drafted)
    ledger = Ledger.load(ledger_path)
    assert ledger.match(run[0].key, "full") is not None
    assert ledger.match(run[0].key, "quick") is None


# --- not validated: the backend ran the op eagerly by policy (the fuser's manifest gate) ---------------

GATED = "not validated on cpu (no entry in cpu.toml); validate it with `nox -s validate -- aten.sub.Tensor`"


def not_validated_run() -> list[CaseResult]:
    key = CaseKey("aten.sub.Tensor", "float32", "alone", "fwd", "fuser", "cpu")
    gated = [
        CaseResult(key, "not_validated", 0.1, 4, "NotValidated: ...", (0.0, 0.0), GATED),
        CaseResult(
            CaseKey("aten.sub.Tensor", "int64", "alone", "fwd", "fuser", "cpu"),
            "not_validated",
            0.1,
            4,
            "NotValidated: ...",
            None,
            GATED,
        ),
    ]
    return [*gated, result("aten.sin.default", "float32", "passed")]


def test_not_validated_cases_are_counted_apart_from_passes_in_the_summary_and_the_json():
    line = summary(not_validated_run()).splitlines()[0]
    assert line.startswith("2 ops, 3 cases: 1 passed, 0 failed,") and line.endswith(", 2 not validated")
    data = to_json(not_validated_run(), META)
    assert (data["totals"]["passed"], data["totals"]["not_validated"]) == (1, 2)
    assert data["per_op"]["aten.sub.Tensor"]["not_validated"] == 2
    assert [case_from_json(case) for case in data["cases"]] == sorted(
        not_validated_run(), key=lambda r: r.key.test_id
    )


def test_not_validated_cases_have_their_own_cell_and_section_and_no_precision_row():
    report = markdown(not_validated_run(), META)
    header, sin, sub = table_rows(report)[:3]
    assert header == ["op", "float32", "int64"]
    assert sub[1:] == ["🔒 1/1", "🔒 1/1"] and sin[1:] == ["✅", "—"]
    assert "🔒 k/n: k of n cases not validated" in report
    section = report.split("#### Not validated (2 cases, 1 ops)\n", 1)[1].splitlines()[0]
    assert section == f"- `aten.sub.Tensor` — 2 cases (float32, int64): {GATED}"
    assert "#### Precision" not in report  # eager against eager: no error of the backend's to show
    assert "ran the op eagerly inside the backend" not in report  # counted once, as not validated


def test_a_failure_outranks_not_validated_in_a_cell():
    run = [*not_validated_run(), result("aten.sub.Tensor", "float32", "failed", context="producer")]
    assert table_rows(markdown(run, META))[2][1] == "❌ 1/2"


def test_merged_shards_keep_their_not_validated_cases(tmp_path):
    first, _ = write(not_validated_run(), META, tmp_path / "one")
    script = Path(__file__).parents[2] / "tools" / "merge_reports.py"
    out = tmp_path / "merged"
    subprocess.run([sys.executable, script, first, "--out", out], capture_output=True, text=True, check=True)
    merged = json.loads(out.with_suffix(".json").read_text())
    assert [case["outcome"] for case in merged["cases"]] == ["not_validated", "not_validated"]


def test_ledger_entries_drafted_from_eager_rejects_take_another_device_s_cause_and_name_exactly_what_failed(
    tmp_path,
):
    from conformance.harness.ledger import Ledger

    broadcast = "sample [s]: eager raised (RuntimeError: output with shape [37, 1] doesn't match the broadcast shape [37, 7]), but the compiled program returned a value"
    # a CPU entry's cause, and nothing yet for CUDA (the suite's own ledger has CUDA entries since session 45)
    known = tmp_path / "known.toml"
    known.write_text(
        r"""[[xfail]]
op = "aten.atan2_.default"
backend = ["fuser", "aot_eager"]
device = "cpu"
dtype = "*"
direction = "fwd"
context = "*"
tier = "full"
reason = "PyTorch's in-place rule"
fails_with = "eager raised \\(\\w+: (output with shape \\[[^]]*\\] doesn't match the broadcast shape)"
"""
    )
    failed = [  # the known entry names these causes
        ("aten.atan2_.default", "float16", "producer"),
        ("aten.atan2_.default", "float16", "from_reduction"),
        ("aten.atan2_.default", "float32", "producer"),
    ]
    lines = [
        "# a header line",
        *(f"{op}-{dtype}-{context}-fwd\t{broadcast}" for op, dtype, context in failed),
    ]
    lines.append(
        "aten.atan2_.default-float64-producer-fwd\tsample [s]: eager raised (RuntimeError: something new)"
    )
    tsv = tmp_path / "failures.tsv"
    tsv.write_text("\n".join(lines) + "\n")
    script = Path(__file__).parents[2] / "tools" / "ledger_from_eager_rejects.py"
    drafted = subprocess.run(
        [sys.executable, script, tsv, "--device", "cuda", "--like", "cpu", "--ledger", known],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "unexplained: aten.atan2_.default-float64-producer-fwd" in drafted.stderr
    ledger_path = tmp_path / "ledger.toml"
    ledger_path.write_text(drafted.stdout)
    ledger = Ledger.load(ledger_path)
    assert len(ledger.entries) == 2  # float16's two contexts, float32's one
    for dtype in ("float16", "float32", "float64"):
        for context in ("alone", "producer", "from_reduction"):
            key = CaseKey("aten.atan2_.default", dtype, context, "fwd", "fuser", "cuda")
            entry = ledger.match(key, "full")
            assert (entry is not None) == ((key.op, dtype, context) in failed), key
            assert ledger.match(key, "quick") is None
            assert ledger.match(dataclasses.replace(key, device="cpu"), "full") is None
            if entry is not None:
                assert re.search(entry.fails_with, broadcast) and entry.reason == "PyTorch's in-place rule"
