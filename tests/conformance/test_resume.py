"""`--conformance-resume`: a run cut short (a lent machine's time limit) goes on where it stopped, in a real
pytest run of the plugin: the cases an earlier report passed are not run again, a failed one is."""

from __future__ import annotations

import gzip
import json

from suite_run import run_suite

SELECTION = ["--conformance-op", "aten.neg.default", "--conformance-dtype", "float32,int32"]


def run(*args: str):
    return run_suite("--conformance-backend", "eager", *SELECTION, *args)


def test_a_resumed_run_runs_only_what_the_earlier_reports_did_not_pass(tmp_path):
    first = run("--conformance-report", str(tmp_path))
    assert first.returncode == 0, first.stdout[-2000:]
    data = json.loads((tmp_path / "conformance-eager-cpu.json").read_text())
    cases = data["cases"]
    assert len(cases) >= 3 and all(case["outcome"] == "passed" for case in cases)

    # As if the machine had stopped: one case failed, the report of the rest gzipped.
    data["cases"][0]["outcome"] = "failed"
    cut = tmp_path / "cut.json.gz"
    with gzip.open(cut, "wt") as file:
        json.dump(data, file)
    resumed = run("--conformance-resume", str(cut), "--conformance-report", str(tmp_path / "resumed"))
    assert resumed.returncode == 0 and "1 passed" in resumed.stdout, resumed.stdout[-2000:]
    assert f"of which {len(cases) - 1} passed in the --conformance-resume reports" in resumed.stdout
    # Its report is the whole run (the earlier passes carried), so that a later resume can start from it.
    whole = json.loads((tmp_path / "resumed" / "conformance-eager-cpu.json").read_text())
    assert sorted(case["id"] for case in whole["cases"]) == sorted(case["id"] for case in cases)
    assert whole["meta"]["resumed"]["cases"] == len(cases) - 1

    finished = run("--conformance-resume", str(tmp_path / "resumed" / "conformance-eager-cpu.json"))
    assert finished.returncode != 0  # nothing is left to run, and the run says so
    assert f"all {len(cases)} cases of this selection passed" in finished.stdout


def test_a_report_of_another_tier_or_a_missing_one_is_refused(tmp_path):
    other = tmp_path / "full.json"
    other.write_text(json.dumps({"meta": {"tier": "full"}, "cases": []}))
    refused = run("--conformance-resume", str(other), "--collect-only")
    assert refused.returncode == 4 and "a report of the 'full' tier, not 'quick'" in refused.stderr
    missing = run("--conformance-resume", str(tmp_path / "nowhere.json"), "--collect-only")
    assert missing.returncode == 4 and "nowhere.json: not a readable report" in missing.stderr
