"""A pytest plugin that appends each conformance case's result to a JSON-lines file the moment the case
finishes (`pytest -p conformance.harness.case_log --case-log PATH`), so that a long run stopped midway keeps every
case it finished: a batch validation (conformance/validate/batch.py) resumes from that file, running
only the cases it lacks (`--case-log-skip FILE`: the ids of cases not to run, one a line).

A line is the case as the conformance report writes it (`report.to_json`), taken from the conformance
plugin's own results, so its outcome is the one the report gives. Only the process that collects the
results writes (pytest-xdist's controller, which receives every worker's reports).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conformance.harness.report import to_json
from conformance.plugin import config_results
from conformance.specs.caseid import CaseKey

_path: list[Path] = []  # the log, where this process writes one


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance")
    group.addoption("--case-log", default=None, help="append each case's result to this JSON-lines file")
    group.addoption("--case-log-skip", default=None, help="a file of case ids (one a line) not to run")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("case_log") and not hasattr(config, "workerinput"):
        _path.append(Path(config.getoption("case_log")))


@pytest.hookimpl(trylast=True)  # after the conformance plugin has chosen the tier's tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("case_log_skip"):
        return
    done = set(Path(config.getoption("case_log_skip")).read_text().split())
    skipped = [item for item in items if _case_id(item) in done]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if _case_id(item) not in done]


def _case_id(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    key = callspec.params.get("conformance_case") if callspec is not None else None
    return key.test_id if key is not None else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """The case's CPU time in its process, logged beside its wall time: what a shared machine's other
    work does not inflate (docs/validation.md measures with it)."""
    started = time.process_time()
    try:
        return (yield)
    finally:
        item.user_properties.append(("cpu_s", round(time.process_time() - started, 3)))


@pytest.hookimpl(trylast=True)  # after the conformance plugin has recorded the case
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    properties = dict(report.user_properties)
    if not _path or report.when != "call" or "conformance_case" not in properties:
        return
    result = config_results()[-1]
    if result.key != CaseKey(**properties["conformance_case"]):
        raise RuntimeError(f"case log: the conformance plugin recorded {result.key}, not this report's case")
    (line,) = to_json([result], {})["cases"]
    line["cpu_s"] = properties.get("cpu_s")
    with _path[0].open("a") as log:
        log.write(json.dumps(line) + "\n")
