"""A pytest plugin that appends each conformance case's result to a JSON-lines file the moment the case
finishes (`pytest -p conformance.case_log --case-log PATH`), so that a long run stopped midway keeps every
case it finished: a batch validation (conformance/validate_batch.py) resumes from that file.

A line is the case as the conformance report writes it (`report.to_json`), taken from the conformance
plugin's own results, so its outcome is the one the report gives. Only the process that collects the
results writes (pytest-xdist's controller, which receives every worker's reports).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.caseid import CaseKey
from conformance.plugin import config_results
from conformance.report import to_json

_path: list[Path] = []  # the log, where this process writes one


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("conformance").addoption(
        "--case-log", default=None, help="append each case's result to this JSON-lines file as it finishes"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("case_log") and not hasattr(config, "workerinput"):
        _path.append(Path(config.getoption("case_log")))


@pytest.hookimpl(trylast=True)  # after the conformance plugin has recorded the case
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    properties = dict(report.user_properties)
    if not _path or report.when != "call" or "conformance_case" not in properties:
        return
    result = config_results()[-1]
    if result.key != CaseKey(**properties["conformance_case"]):
        raise RuntimeError(f"case log: the conformance plugin recorded {result.key}, not this report's case")
    (line,) = to_json([result], {})["cases"]
    with _path[0].open("a") as log:
        log.write(json.dumps(line) + "\n")
